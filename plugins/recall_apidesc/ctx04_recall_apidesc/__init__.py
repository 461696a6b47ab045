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
"""

from __future__ import annotations

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Query, Recall

SOURCE = "apidesc"


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    text = f"{query.goal_hint}\n{query.task_text}"
    matches = repo.index.search_descriptions(
        text, settings.apidesc_limit, settings.search_postings_budget
    )
    candidates = tuple(
        Candidate(
            span=node.span, kind=node.kind, qualname=node.qualname, sources=(SOURCE,),
            recall_score=score,
        )
        for node, score in matches.found
    )
    return Recall(source=SOURCE, candidates=candidates, diagnostics=matches.omission(SOURCE))
