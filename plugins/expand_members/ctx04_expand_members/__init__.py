"""Member expansion: the definitions inside a leading class or module.

Recall finds a class when the task names it or its attribute lines match,
and merge keeps such a hit on the class itself; the method the change is in
(``Subquery.__init__`` for "it should be set in the Subquery constructor")
is then never a candidate. Once a first ranking exists, each class-like
candidate (``TYPE_KINDS``) or module among the first
``settings.members_ranks`` proposes the functions, methods and types
directly inside it, so the signals can weigh each member on its own text.

Candidates: in rank order of their container, each container's members in
file order, each member once. Cap: at most ``settings.members_limit``; when
there are more, the first are kept and the result carries
``Diagnostic(kind="unavailable", reason="truncated")``.
"""

from __future__ import annotations

from ctx04_core.graph import node_recall
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_of
from ctx04_core.types import (
    CONTAINER_KINDS,
    FUNCTION_KINDS,
    TYPE_KINDS,
    Node,
    Query,
    RankedCandidate,
    Recall,
)

SOURCE = "members"
MEMBER_KINDS = FUNCTION_KINDS | TYPE_KINDS


def members(ranked: tuple[RankedCandidate, ...], repo: Repo, ranks: int) -> list[Node]:
    """The direct members of the leading containers, in order, each once."""
    found: dict[Node, None] = {}
    for item in ranked[:ranks]:
        if item.candidate.kind not in CONTAINER_KINDS:
            continue
        container = node_of(item.candidate, repo)
        if container is None:
            continue
        for child in repo.index.children(container):
            if child.kind in MEMBER_KINDS:
                found.setdefault(child)
    return list(found)


@hookimpl
def expand(
    query: Query, ranked: tuple[RankedCandidate, ...], repo: Repo, settings: Settings
) -> Recall:
    found = members(ranked, repo, settings.members_ranks)
    return node_recall(SOURCE, found, settings.members_limit, "members of the leading containers")
