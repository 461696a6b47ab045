"""A candidate's own lines: its span minus the definitions nested in it.

A class's methods and a module's functions are candidates of their own, so
scoring them again as part of the enclosing class or module would count the
same text twice and let a big container outrank the definition that matters.
The benchmark's gold regions are the same lines (``node_own_lines``, from a
file's nodes), so what the ranking reads of a candidate and what the metrics
count as its region cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctx04_core.repository import Repo
from ctx04_core.types import FUNCTION_KINDS, MODULE, TYPE_KINDS, Candidate, Node

# Nesting depth by kind: a node with the very same span as another is nested
# in it when it is the deeper kind (a file holding one class and nothing else).
_DEPTH = {MODULE: 0, **dict.fromkeys(TYPE_KINDS, 1), **dict.fromkeys(FUNCTION_KINDS, 2)}


def node_of(candidate: Candidate, repo: Repo) -> Node | None:
    """The index node the candidate stands for, or None for a run of lines."""
    if candidate.qualname is None:
        return None
    key = (candidate.qualname, candidate.span.start_line)
    for node in repo.index.file_nodes(candidate.span.path):
        if (node.qualname, node.span.start_line) == key:
            return node
    return None


def node_own_lines(node: Node, nodes: Sequence[Node]) -> list[int]:
    """The node's own lines among its file's ``nodes``: a function's or
    method's whole span, a type's or module's span minus every other node
    nested in it."""
    span = node.span
    if node.kind in FUNCTION_KINDS:
        return list(range(span.start_line, span.end_line + 1))
    nested: set[int] = set()
    for other in nodes:
        inside = span.contains(other.span) and (
            other.span != span or _DEPTH[other.kind] > _DEPTH[node.kind]
        )
        if other is not node and inside:
            nested.update(range(other.span.start_line, other.span.end_line + 1))
    return [line for line in range(span.start_line, span.end_line + 1) if line not in nested]


def own_lines(candidate: Candidate, repo: Repo) -> list[int]:
    """The candidate's own lines (its whole span when it is no node), clipped to the file."""
    source = repo.source(candidate.span.path)
    if source is None:
        return []
    node = node_of(candidate, repo)
    lines = (
        range(candidate.span.start_line, candidate.span.end_line + 1) if node is None
        else node_own_lines(node, repo.index.file_nodes(candidate.span.path))
    )
    return [n for n in lines if n <= len(source.lines)]


def own_text(candidate: Candidate, repo: Repo) -> list[tuple[int, str]]:
    """The own lines with their text."""
    source = repo.source(candidate.span.path)
    if source is None:
        return []
    return [(n, source.lines[n - 1]) for n in own_lines(candidate, repo)]


def span_text(candidate: Candidate, repo: Repo) -> list[tuple[int, str]]:
    """Every line of the candidate's span with its text, clipped to the file
    (a stale index may place a span past its end)."""
    source = repo.source(candidate.span.path)
    if source is None:
        return []
    last = min(candidate.span.end_line, len(source.lines))
    return [(n, source.lines[n - 1]) for n in range(candidate.span.start_line, last + 1)]


def runs(lines: list[int]) -> tuple[tuple[int, int], ...]:
    """Sorted line numbers as inclusive runs: [1, 2, 3, 7] -> ((1, 3), (7, 7))."""
    found: list[tuple[int, int]] = []
    for line in lines:
        if found and line <= found[-1][1] + 1:
            found[-1] = (found[-1][0], max(found[-1][1], line))
        else:
            found.append((line, line))
    return tuple(found)
