"""API-description recall (spec §3.2, source 2): definitions described like the task.

The task's goal hint and full text are scored against each function, method
and class description in the code index (signature + first docstring
paragraph, spec §4) with the index's BM25 scorer: description against
description, so a function whose docstring says what the task asks for is
found even when the task names none of its identifiers.

Each match becomes a candidate for the whole definition, carrying the BM25
score as ``recall_score``. The text's terms are searched as the index's
``search_descriptions`` keeps them: the rarest in the repository within
``settings.search_postings_budget``; those left out are named in an
``omitted`` diagnostic.

Cap: at most ``settings.apidesc_limit`` (20) definitions, best first.

The query's descriptions (``Query.descriptions``, added by a
``describe_query`` plugin: a model's account of the functions the change will
call or touch, spec §2 row 11) are searched the same way, each on its own,
and what they find carries the description's source (``model-query``) as its
provenance instead of ``apidesc``: at most ``settings.description_recall_limit``
(20) definitions in all, taken in turn from each description's best.
"""

from __future__ import annotations

from itertools import chain, zip_longest

from ctx04_core.hookspecs import hookimpl
from ctx04_core.index.queries import Matches
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Diagnostic, Query, Recall

SOURCE = "apidesc"


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    text = f"{query.goal_hint}\n{query.task_text}"
    matches = repo.index.search_descriptions(
        text, settings.apidesc_limit, settings.search_postings_budget
    )
    candidates = tuple(_found(matches, SOURCE))
    described, omitted = described_candidates(query, repo, settings)
    return Recall(
        source=SOURCE, candidates=candidates + described,
        diagnostics=matches.omission(SOURCE) + omitted,
    )


def described_candidates(
    query: Query, repo: Repo, settings: Settings
) -> tuple[tuple[Candidate, ...], tuple[Diagnostic, ...]]:
    """The definitions the query's descriptions match, each marked with its
    description's source: the first of every description's matches, then the
    second of each, ..., each definition once per source, at most
    ``settings.description_recall_limit``; and the terms budget's omissions."""
    limit = settings.description_recall_limit
    if not query.descriptions or limit <= 0:
        return (), ()
    per_description: list[list[Candidate]] = []
    omitted: dict[Diagnostic, None] = {}
    for description in query.descriptions:
        matches = repo.index.search_descriptions(
            description.text, limit, settings.search_postings_budget
        )
        omitted.update(dict.fromkeys(matches.omission(description.source)))
        per_description.append(_found(matches, description.source))
    found: dict[tuple[object, ...], Candidate] = {}
    for candidate in chain.from_iterable(zip_longest(*per_description)):
        if candidate is None:
            continue
        key = (candidate.span, candidate.qualname, candidate.sources)
        if key not in found and len(found) < limit:
            found[key] = candidate
    return tuple(found.values()), tuple(omitted)


def _found(matches: Matches, source: str) -> list[Candidate]:
    """The matched definitions as candidates of ``source``, best first, each with
    its description score as ``recall_score``."""
    return [
        Candidate(
            span=node.span, kind=node.kind, qualname=node.qualname, sources=(source,),
            recall_score=score,
        )
        for node, score in matches.found
    ]
