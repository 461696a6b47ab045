"""Identifier-weighted BM25 re-rank of the merged candidates (spec §3.4)."""

from __future__ import annotations

from ctx04_core.bm25 import bm25_scores, term_weights
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import own_text
from ctx04_core.text import tokenize
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
    scores = bm25_scores(weights, docs, settings.bm25_k1, settings.bm25_b)
    # Ties keep a fixed order; sort() is stable, so equal keys stay in merge order.
    order = sorted(
        range(len(candidates)),
        key=lambda i: (-scores[i], candidates[i].span.path, candidates[i].span.start_line),
    )
    return [
        RankedCandidate(candidates[i], rank, scores[i])
        for rank, i in enumerate(order[: settings.top_k], start=1)
    ]
