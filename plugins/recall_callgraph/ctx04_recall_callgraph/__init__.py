"""Call-graph recall (spec §3.2, source 3): the definitions one hop from a named one.

Every query identifier that the code index resolves to functions, methods or
classes (the seeds) is expanded one hop over the index's edges:

1. callees: the definitions named by the seed's ``invoke`` edges;
2. callers: the definitions holding an ``invoke`` edge that names the seed;
3. contained: the definitions a seed class contains (``contain`` edges);
4. container: the class a seed method or nested class sits in;
5. imported: the repository definitions that the ``import`` edges of the
   seed's module (or of the seed) bring in and that the seed's lines name,
   so the types a function annotates with or passes along are found even
   when it never calls them.

Edges name their targets by simple name (``store.save()`` and ``save()``
both name ``save``), so a name resolves to every definition of it; the
re-rank downstream sorts out which namesake matters.

Candidates are the neighbours only (no seed is proposed), each once, in
identifier order, then the groups above in that order, each group in (path,
line) order. Modules are never candidates: a module is not a definition,
and its lines reach the slice through lexical recall.

Cap: at most ``settings.callgraph_limit`` (20) neighbours; when there are
more, the first are kept and the result carries
``Diagnostic(kind="unavailable", reason="truncated")``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.text import IDENTIFIER
from ctx04_core.types import (
    FUNCTION_KINDS,
    TYPE_KINDS,
    Candidate,
    Diagnostic,
    Edge,
    Node,
    Query,
    Recall,
)

if TYPE_CHECKING:
    from ctx04_core.index import CodeIndex

SOURCE = "callgraph"
DEFINITION_KINDS = FUNCTION_KINDS | TYPE_KINDS


def definitions(nodes: Iterable[Node]) -> list[Node]:
    return [node for node in nodes if node.kind in DEFINITION_KINDS]


def by_position(nodes: Iterable[Node]) -> list[Node]:
    return sorted(nodes, key=lambda n: (n.span.path, n.span.start_line, n.qualname))


def node_of_edge(index: CodeIndex, edge: Edge) -> Node | None:
    """The node an edge comes from.

    An edge names its source by qualname only, and a qualname may belong to
    several nodes (a property's getter and setter); the edge's line lies in
    exactly the span of the one it comes from.
    """
    for node in index.lookup(edge.source):
        if node.qualname == edge.source and node.span.start_line <= edge.line <= node.span.end_line:
            return node
    return None


def module_of(index: CodeIndex, node: Node) -> Node | None:
    return next((n for n in index.file_nodes(node.span.path) if n.kind == "module"), None)


def names_used(repo: Repo, node: Node) -> frozenset[str]:
    """Every identifier written in the node's lines (calls, annotations, bases, values)."""
    source = repo.source(node.span.path)
    if source is None:
        return frozenset()
    lines = source.lines[node.span.start_line - 1 : node.span.end_line]
    return frozenset(m.group() for line in lines for m in IDENTIFIER.finditer(line))


def imported(repo: Repo, seed: Node) -> list[Node]:
    """The repository definitions the seed's module (or the seed) imports and the seed names.

    ``from app.models import Row`` at the top of a module makes ``Row`` a
    neighbour of each definition there that writes ``Row``, as a call, an
    annotation or a value; an import from outside the repository names no
    definition here.
    """
    index = repo.index
    module = module_of(index, seed)
    edges = [*index.edges_from(seed), *(index.edges_from(module) if module else [])]
    used = names_used(repo, seed)
    found: list[Node] = []
    for edge in edges:
        name = edge.target.rsplit(".", 1)[-1]
        if edge.kind != "import" or name not in used:
            continue
        named = index.lookup(edge.target)
        base = edge.target.rpartition(".")[0]
        if not named and base and any(n.kind == "module" for n in index.lookup(base)):
            # ``from app import encode`` where app/__init__.py re-exports it from
            # a submodule: the definition lives under another qualname.
            named = index.lookup(name)
        # An imported module is found but is not a definition.
        found.extend(definitions(named))
    return found


def neighbours(repo: Repo, seed: Node) -> list[Node]:
    """The seed's one-hop neighbours in group order, duplicates not yet removed."""
    index = repo.index
    callees = [
        node
        for edge in index.edges_from(seed)
        if edge.kind == "invoke"
        for node in definitions(index.lookup(edge.target))
    ]
    callers = [
        caller
        for edge in index.references_to(seed.name)
        if edge.kind == "invoke"
        and (caller := node_of_edge(index, edge)) is not None
        and caller.kind in DEFINITION_KINDS
    ]
    contained = definitions(index.children(seed))
    enclosing = [
        n
        for n in definitions(index.file_nodes(seed.span.path))
        if n != seed and n.span.contains(seed.span)
    ]
    # The innermost enclosing definition: the latest start, then the shortest span.
    container = (
        [max(enclosing, key=lambda n: (n.span.start_line, -n.span.end_line))] if enclosing else []
    )
    return [
        *by_position(callees),
        *by_position(callers),
        *by_position(contained),
        *container,
        *by_position(imported(repo, seed)),
    ]


def expansion(repo: Repo, identifiers: Iterable[str]) -> Iterator[tuple[Node, str]]:
    """Every (neighbour, identifier) pair in candidate order, repeats included."""
    seeds = [
        (identifier, by_position(definitions(repo.index.lookup(identifier))))
        for identifier in identifiers
    ]
    seed_set = {node for _, nodes in seeds for node in nodes}
    for identifier, nodes in seeds:
        for seed in nodes:
            for node in neighbours(repo, seed):
                if node not in seed_set:
                    yield node, identifier


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    cap = settings.callgraph_limit
    chosen: dict[Node, str] = {}  # neighbour -> the identifier that led to it, in order
    for node, identifier in expansion(repo, query.identifiers):
        chosen.setdefault(node, identifier)
        # One neighbour past the cap proves the cut; expanding further is wasted work.
        if len(chosen) > cap:
            break
    candidates = tuple(
        Candidate(
            span=node.span, kind=node.kind, qualname=node.qualname, sources=(SOURCE,),
            terms=(identifier,),
        )
        for node, identifier in list(chosen.items())[:cap]
    )
    diagnostics: tuple[Diagnostic, ...] = ()
    if len(chosen) > cap:
        diagnostics = (
            Diagnostic(
                "unavailable", "truncated",
                detail=f"more than {cap} call-graph neighbours, kept the first {cap}",
            ),
        )
    return Recall(source=SOURCE, candidates=candidates, diagnostics=diagnostics)
