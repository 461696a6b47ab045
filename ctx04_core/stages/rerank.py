"""Identifier-weighted BM25 re-rank (spec §3.4) and the lexical evidence beside it, as signals."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from ctx04_core.bm25 import bm25_scores, idf, term_weights
from ctx04_core.hookspecs import hookimpl
from ctx04_core.memo import RetrievalMemo
from ctx04_core.paths import is_auxiliary_path
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import own_text
from ctx04_core.text import STOPWORDS, simple_name, tokenize
from ctx04_core.types import MODULE, Candidate, Query, Signal

OWNER = "rerank"


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
def signals(
    query: Query,
    candidates: tuple[Candidate, ...],
    repo: Repo,
    settings: Settings,
    memo: RetrievalMemo,
) -> list[Signal]:
    """The §3.4 BM25 match, and the evidence beside it that BM25 cannot see.

    ``bm25`` adds; the others scale it: a definition the task names counts
    more the fewer definitions share its name (``definition``: 1 / that
    number); a place the task points at, a stack frame or a link to its lines
    (``pointed_at``); a file whose path names what the goal sentence is about
    (``path``); tests, docs, examples and benchmarks, rarely what a change
    edits (``auxiliary``, weight ``auxiliary_weight - 1``); a file the
    title's tag names (``title``, weight ``title_boost``: see
    :func:`title_tag`).
    """
    docs = [
        memo.get(OWNER, (c.span, c.qualname), partial(_own_tokens, c, repo)) for c in candidates
    ]
    weights = memo.get(OWNER, "weights", partial(_weights, query, repo, settings))
    if settings.repository_idf:
        idfs = memo.get(OWNER, "idfs", partial(_repository_idfs, weights, repo))
        scores = bm25_scores(weights, docs, settings.bm25_k1, settings.bm25_b, idfs)
    else:
        scores = bm25_scores(weights, docs, settings.bm25_k1, settings.bm25_b)
    rarity = memo.get(OWNER, "rarity", partial(definition_rarity, query, repo))
    goal = _words(query.goal_hint) - STOPWORDS
    tag = title_tag(query.task_text)

    def each(value: Callable[[Candidate], float]) -> tuple[float, ...]:
        return tuple(value(c) for c in candidates)

    return [
        Signal("bm25", tuple(scores), 1.0),
        Signal("definition", each(lambda c: _named_rarity(c, rarity)),
               settings.definition_boost, "scale"),
        Signal("pointed_at", each(lambda c: float(c.pointed_at)), settings.location_boost, "scale"),
        Signal("path", each(lambda c: float(bool(goal & _path_words(c.span.path)))),
               settings.path_boost, "scale"),
        Signal("auxiliary", each(lambda c: float(is_auxiliary_path(c.span.path))),
               settings.auxiliary_weight - 1, "scale"),
        Signal("title", each(lambda c: float(tag is not None and _stem(c.span.path) == tag)),
               settings.title_boost, "scale"),
    ]


# A report's first line led by the component it is about: ``[Chaturbate] ...``,
# ``spankbang - 403 Forbidden``, ``skipping: ...``; not a scope (``fmt::join``).
_TITLE_TAG = re.compile(
    r"\s*(?:\[(?P<bracket>[^\]\s]{2,40})\]|(?P<word>[A-Za-z][\w.-]{1,40})\s*(?::(?!:)|\s-\s))"
)


def title_tag(task_text: str) -> str | None:
    """The word a report's title is tagged with, as a file stem is compared
    (lower case, ``-`` as ``_``), or None. Every candidate of a file of that
    stem is boosted: where the tag is the stem of exactly one non-test file,
    that file held the change in 23 of 25 training and dev tasks, and a site
    report (``[Chaturbate]``) names no identifier, so nothing else in the task
    points there."""
    found = _TITLE_TAG.match(task_text)
    return None if found is None else _stem_key(found["bracket"] or found["word"])


def _stem(path: str) -> str:
    return _stem_key(path.rsplit("/", 1)[-1].rsplit(".", 1)[0])


def _stem_key(word: str) -> str:
    return word.lower().replace("-", "_")


def _named_rarity(candidate: Candidate, rarity: dict[str, float]) -> float:
    if candidate.kind == MODULE:
        return 0.0
    return rarity.get((candidate.qualname or "").rsplit(".", 1)[-1], 0.0)


def _own_tokens(candidate: Candidate, repo: Repo) -> list[str]:
    return tokenize("\n".join(text for _, text in own_text(candidate, repo)))


def _weights(query: Query, repo: Repo, settings: Settings) -> dict[str, float]:
    """Each query term's weight: identifiers and the goal sentence's words count more."""
    names = repo.index.defined(lower=True)
    weights = term_weights(query_terms(query), names, settings.identifier_weight)
    for term in set(tokenize(query.goal_hint)) & weights.keys():
        weights[term] *= settings.goal_weight
    return weights


def _repository_idfs(weights: dict[str, float], repo: Repo) -> dict[str, float]:
    """Each term's rarity measured over the whole repository.

    The candidates were recalled because they contain the task's terms, so
    within them those terms look common; across the repository a name the
    task gives is rare and should count.
    """
    total, frequency = repo.index.term_statistics(list(weights))
    return {term: idf(total, frequency.get(term, 0)) for term in weights}


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
            found = [n for n in repo.index.lookup(name) if n.kind != MODULE]
            if found:
                rarity[name] = 1 / len(found)
    return rarity
