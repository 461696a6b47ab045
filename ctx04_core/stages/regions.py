"""A candidate's own lines: its span minus the definitions nested in it.

A class's methods and a module's functions are candidates of their own, so
scoring them again as part of the enclosing class or module would count the
same text twice and let a big container outrank the definition that matters.
"""

from __future__ import annotations

from ctx04_core.repository import Repo
from ctx04_core.types import CONTAINER_KINDS, Candidate, Node


def node_of(candidate: Candidate, repo: Repo) -> Node | None:
    """The index node the candidate stands for, or None for a run of lines."""
    if candidate.qualname is None:
        return None
    key = (candidate.qualname, candidate.span.start_line)
    for node in repo.index.file_nodes(candidate.span.path):
        if (node.qualname, node.span.start_line) == key:
            return node
    return None


def own_lines(candidate: Candidate, repo: Repo) -> list[int]:
    """Line numbers of the span not inside a child node, clipped to the file."""
    source = repo.source(candidate.span.path)
    if source is None:
        return []
    last = min(candidate.span.end_line, len(source.lines))
    lines = range(candidate.span.start_line, last + 1)
    node = node_of(candidate, repo) if candidate.kind in CONTAINER_KINDS else None
    if node is None:
        return list(lines)
    nested = {
        n for child in repo.index.children(node)
        for n in range(child.span.start_line, child.span.end_line + 1)
    }
    return [n for n in lines if n not in nested]


def own_text(candidate: Candidate, repo: Repo) -> list[tuple[int, str]]:
    """The own lines with their text."""
    source = repo.source(candidate.span.path)
    if source is None:
        return []
    return [(n, source.lines[n - 1]) for n in own_lines(candidate, repo)]
