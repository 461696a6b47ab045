"""The code index's edges read as a graph: what a definition calls and imports.

Edges name their targets by simple name (``store.save()`` and ``save()`` both
name ``save``), so a name resolves to every definition of it; the recall and
ranking plugins that walk the graph (call-graph one hop, tests to code) share
these readings instead of each resolving names its own way.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctx04_core.repository import Repo
from ctx04_core.text import IDENTIFIER
from ctx04_core.types import (
    FUNCTION_KINDS,
    MODULE,
    TYPE_KINDS,
    Candidate,
    Diagnostic,
    Edge,
    Node,
    Recall,
)

DEFINITION_KINDS = FUNCTION_KINDS | TYPE_KINDS


def definitions(nodes: Iterable[Node]) -> list[Node]:
    return [node for node in nodes if node.kind in DEFINITION_KINDS]


def by_position(nodes: Iterable[Node]) -> list[Node]:
    return sorted(nodes, key=lambda n: (n.span.path, n.span.start_line, n.qualname))


def node_of_edge(repo: Repo, edge: Edge) -> Node | None:
    """The node an edge comes from.

    An edge names its source by qualname only, and a qualname may belong to
    several nodes (a property's getter and setter); the edge's line lies in
    exactly the span of the one it comes from.
    """
    for node in repo.index.lookup(edge.source):
        if node.qualname == edge.source and node.span.start_line <= edge.line <= node.span.end_line:
            return node
    return None


def module_of(repo: Repo, path: str) -> Node | None:
    """The module node of the file at ``path``; None for a language without one."""
    return next((n for n in repo.index.file_nodes(path) if n.kind == MODULE), None)


def nested_in(nodes: Iterable[Node], qualname: str | None, start: int, end: int) -> list[Node]:
    """The ``nodes`` lying within lines ``start``-``end``, the one named
    ``qualname`` (the container itself) left out, in their order: what a
    reader who reads a class or a module as its members reads after it. One
    reading for the placement (``stages/place.py``) and the eval's
    ``function_acc_read@k``, so the two count the same definitions."""
    return [
        n for n in nodes
        if n.qualname != qualname and start <= n.span.start_line <= n.span.end_line <= end
    ]


def definitions_within(repo: Repo, candidate: Candidate) -> tuple[str, ...]:
    """The qualified names of the index's definitions within the candidate's
    span (``nested_in``)."""
    span = candidate.span
    nodes = repo.index.file_nodes(span.path)
    return tuple(n.qualname for n in nested_in(nodes, candidate.qualname,
                                               span.start_line, span.end_line))


def names_used(repo: Repo, node: Node) -> frozenset[str]:
    """Every identifier written in the node's lines (calls, annotations, bases, values)."""
    source = repo.source(node.span.path)
    if source is None:
        return frozenset()
    lines = source.lines[node.span.start_line - 1 : node.span.end_line]
    return frozenset(m.group() for line in lines for m in IDENTIFIER.finditer(line))


def callees(repo: Repo, node: Node) -> list[list[Node]]:
    """Per name ``node``'s ``invoke`` edges call, in the line order of its first
    call, the definitions it resolves to (a name called again resolves once)."""
    called = dict.fromkeys(
        edge.target for edge in repo.index.edges_from(node) if edge.kind == "invoke"
    )
    return [definitions(repo.index.lookup(name)) for name in called]


def imported(repo: Repo, seed: Node) -> list[Node]:
    """The repository definitions the seed's module (or the seed) imports and the seed names.

    ``from app.models import Row`` at the top of a module makes ``Row`` a
    neighbour of each definition there that writes ``Row``, as a call, an
    annotation or a value; an import from outside the repository names no
    definition here.
    """
    index = repo.index
    module = module_of(repo, seed.span.path)
    edges = [*index.edges_from(seed), *(index.edges_from(module) if module else [])]
    used = names_used(repo, seed)
    found: list[Node] = []
    for edge in edges:
        name = edge.target.rsplit(".", 1)[-1]
        if edge.kind != "import" or name not in used:
            continue
        named = index.lookup(edge.target)
        base = edge.target.rpartition(".")[0]
        if not named and base and any(n.kind == MODULE for n in index.lookup(base)):
            # ``from app import encode`` where app/__init__.py re-exports it from
            # a submodule: the definition lives under another qualname.
            named = index.lookup(name)
        # An imported module is found but is not a definition.
        found.extend(definitions(named))
    return found


def node_recall(source: str, nodes: list[Node], cap: int, what: str) -> Recall:
    """The first ``cap`` nodes as ``source``'s candidates; past the cap, the cut is
    reported as ``unavailable``/``truncated`` with how many ``what`` there were."""
    candidates = tuple(
        Candidate(span=node.span, kind=node.kind, qualname=node.qualname, sources=(source,))
        for node in nodes[:cap]
    )
    diagnostics: tuple[Diagnostic, ...] = ()
    if len(nodes) > cap:
        diagnostics = (
            Diagnostic(
                "unavailable", "truncated",
                detail=f"{len(nodes)} {what}, kept the first {cap}",
            ),
        )
    return Recall(source, candidates, diagnostics)
