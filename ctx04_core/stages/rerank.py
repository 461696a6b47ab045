"""Identifier-weighted BM25 re-rank of the merged candidates (spec §3.4)."""

from __future__ import annotations

from ctx04_core.bm25 import bm25_scores, idf, term_weights
from ctx04_core.hookspecs import hookimpl
from ctx04_core.paths import is_auxiliary_path
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import own_text
from ctx04_core.text import STOPWORDS, simple_name, tokenize
from ctx04_core.types import Candidate, Query, RankedCandidate


def query_terms(query: Query) -> list[str]:
    """Distinct tokens of everything the query says, first-seen order."""
    parts = (
        query.task_text,
        *query.error_strings,
        *query.identifiers,
        *query.unresolved,
        *query.test_names,
        *query.file_paths,
    )
    return list(dict.fromkeys(term for part in parts for term in tokenize(part)))


@hookimpl
def rerank(
    query: Query, candidates: tuple[Candidate, ...], repo: Repo, settings: Settings
) -> list[RankedCandidate]:
    docs = [
        tokenize("\n".join(text for _, text in own_text(candidate, repo)))
        for candidate in candidates
    ]
    names = frozenset(name.lower() for name in repo.index.names())
    weights = term_weights(query_terms(query), names, settings.identifier_weight)
    for term in set(tokenize(query.goal_hint)) & weights.keys():
        weights[term] *= settings.goal_weight
    if settings.repository_idf:
        scores = _scores_with_repository_idf(weights, docs, repo, settings)
    else:
        scores = bm25_scores(weights, docs, settings.bm25_k1, settings.bm25_b)
    scores = adjusted(scores, candidates, query, repo, settings)
    # Ties keep a fixed order; sort() is stable, so equal keys stay in merge order.
    order = sorted(
        range(len(candidates)),
        key=lambda i: (-scores[i], candidates[i].span.path, candidates[i].span.start_line),
    )
    return [
        RankedCandidate(candidates[i], rank, scores[i])
        for rank, i in enumerate(order[: settings.top_k], start=1)
    ]


def _scores_with_repository_idf(
    weights: dict[str, float], docs: list[list[str]], repo: Repo, settings: Settings
) -> list[float]:
    """BM25 with each term's rarity measured over the whole repository.

    The candidates were recalled because they contain the task's terms, so
    within them those terms look common; across the repository a name the
    task gives is rare and should count.
    """
    total, frequency = repo.index.term_statistics(list(weights))
    idfs = {term: idf(total, frequency.get(term, 0)) for term in weights}
    return bm25_scores(weights, docs, settings.bm25_k1, settings.bm25_b, idfs)


def adjusted(
    scores: list[float],
    candidates: tuple[Candidate, ...],
    query: Query,
    repo: Repo,
    settings: Settings,
) -> list[float]:
    """The BM25 scores with the evidence BM25 cannot see.

    A definition named by the task counts more the fewer definitions share its
    name; a place the task points at (a stack frame, a link to lines) counts
    more, and so does a file whose path names what the goal sentence is
    about; tests, docs, examples and benchmarks are rarely what a change edits.
    """
    rarity = definition_rarity(query, repo)
    goal = _words(query.goal_hint) - STOPWORDS
    out = []
    for score, candidate in zip(scores, candidates, strict=True):
        name = (candidate.qualname or "").rsplit(".", 1)[-1]
        if candidate.kind != "module" and name in rarity:
            score *= 1 + settings.definition_boost * rarity[name]
        if candidate.pointed_at:
            score *= 1 + settings.location_boost
        if goal & _path_words(candidate.span.path):
            score *= 1 + settings.path_boost
        if is_auxiliary_path(candidate.span.path):
            score *= settings.auxiliary_weight
        out.append(score)
    return out


def _words(text: str) -> set[str]:
    """Tokens of three letters or more, a plural's s dropped: a title says
    "templates" of code in ``template/``, "fields" of ``fields.py``."""
    return {t[:-1] if len(t) > 3 and t.endswith("s") else t for t in tokenize(text) if len(t) > 2}


def _path_words(path: str) -> set[str]:
    """The words of a path's folders and file name, without its extension."""
    return _words(path.rsplit(".", 1)[0].replace("/", " "))


def definition_rarity(query: Query, repo: Repo) -> dict[str, float]:
    """1 / number of definitions, for each simple name the task's identifiers resolve to."""
    rarity: dict[str, float] = {}
    for identifier in query.identifiers:
        name = simple_name(identifier)
        if name not in rarity:
            found = [n for n in repo.index.lookup(name) if n.kind != "module"]
            if found:
                rarity[name] = 1 / len(found)
    return rarity
