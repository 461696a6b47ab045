"""Whole-repository lexical recall: definitions whose own code matches the task's words.

Ripgrep finds the identifiers a task names; many tasks name few or none and
describe the behaviour instead. This source scores the task's words against
every definition's own code (its span less the definitions nested in it,
indexed in FTS5) with BM25 over the whole repository, so a function that
uses the vocabulary of the report is proposed even when no name matches.

Query: the task's distinct terms (``ctx04_core.text.tokenize``) less common
English words, in first-seen order, at most the index's query-term cap; of
those, the rarest in the repository within ``settings.search_postings_budget``
(the rest, left out, are named in an ``omitted`` diagnostic).
Cap: at most ``settings.bm25_recall_limit`` definitions, best first.
"""

from __future__ import annotations

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.text import content_terms
from ctx04_core.types import Candidate, Query, Recall

SOURCE = "bm25"


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    matches = repo.index.search_code(
        content_terms(query.task_text), settings.bm25_recall_limit,
        settings.search_postings_budget,
    )
    candidates = tuple(
        Candidate(
            span=node.span, kind=node.kind, qualname=node.qualname, sources=(SOURCE,),
            recall_score=score,
        )
        for node, score in matches.found
    )
    return Recall(source=SOURCE, candidates=candidates, diagnostics=matches.omission(SOURCE))
