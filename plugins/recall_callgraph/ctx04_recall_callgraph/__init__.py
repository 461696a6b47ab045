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

Expansion ``callees`` (after the first ranking): the definitions the first
``settings.callee_ranks`` (3) functions and methods of the weighted order
call, by the same ``invoke`` edges and the same namesake limit, each once,
in the leaders' order and each call's line order; one already a candidate
(another leader too) gains the source, which the learned order reads in
its count of sources. The function a fix changes is often a helper the
leading function calls that shares no word with the task (``_cstack``
under ``separability_matrix``): held out on the training tasks, Python
line recall 0.486 -> 0.512 and function Acc@10 0.509 -> 0.518
(docs/benchmarks.md, "The leading functions' callees"). Cap: at most
``settings.callgraph_limit``, the cut reported as above.

Signal ``neighbour`` (scale, weight ``settings.neighbour_boost``): the
function the task does not name is often one hop from one it does (the
helper ``iter_content`` calls, the method of the class it names). A
candidate one hop from a definition of a named identifier is worth
``1 / n``, n the definitions sharing that name (the best over the names that
reach it), so the neighbours of a unique name count fully and those of
``get`` not at all (names with more than ``RARE_NAMESAKES`` definitions are
not expanded).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial

from ctx04_core.graph import (
    DEFINITION_KINDS,
    by_position,
    callees,
    definitions,
    imported,
    node_of_edge,
    node_recall,
)
from ctx04_core.hookspecs import hookimpl
from ctx04_core.memo import RetrievalMemo
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_of
from ctx04_core.types import (
    FUNCTION_KINDS,
    Candidate,
    Diagnostic,
    Node,
    Query,
    RankedCandidate,
    Recall,
    Signal,
)

SOURCE = "callgraph"
CALLEES = "callees"
# A name defined more often than this says little about which definition the
# task means, and expanding each would cost a lookup per namesake.
RARE_NAMESAKES = 4


def neighbours(repo: Repo, seed: Node) -> list[Node]:
    """The seed's one-hop neighbours in group order, duplicates not yet removed."""
    index = repo.index
    called = [node for named in callees(repo, seed) for node in named]
    callers = [
        caller
        for edge in index.references_to(seed.name)
        if edge.kind == "invoke"
        and (caller := node_of_edge(repo, edge)) is not None
        and caller.kind in DEFINITION_KINDS
    ]
    contained = definitions(index.children(seed))
    return [
        *by_position(called),
        *by_position(callers),
        *by_position(contained),
        *_container(repo, seed),
        *by_position(imported(repo, seed)),
    ]


def _container(repo: Repo, seed: Node) -> list[Node]:
    """The innermost definition enclosing the seed (the latest start, then the
    shortest span), or none."""
    enclosing = [
        n
        for n in definitions(repo.index.file_nodes(seed.span.path))
        if n != seed and n.span.contains(seed.span)
    ]
    if not enclosing:
        return []
    return [max(enclosing, key=lambda n: (n.span.start_line, -n.span.end_line))]


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


def leaders_callees(ranked: tuple[RankedCandidate, ...], repo: Repo, leaders: int) -> list[Node]:
    """What the first ``leaders`` functions and methods of ``ranked`` call, in
    their order and each call's line order (a line's calls by name), each
    once; a leader's call of itself, and a name more than ``RARE_NAMESAKES``
    definitions share, are left out."""
    found: dict[Node, None] = {}
    calling = [item.candidate for item in ranked if item.candidate.kind in FUNCTION_KINDS]
    for candidate in calling[:leaders]:
        node = node_of(candidate, repo)
        if node is None:
            continue
        for named in callees(repo, node):
            if len(named) <= RARE_NAMESAKES:
                for callee in named:
                    if callee != node:
                        found.setdefault(callee)
    return list(found)


@hookimpl
def expand(
    query: Query, ranked: tuple[RankedCandidate, ...], repo: Repo, settings: Settings
) -> Recall | None:
    if settings.callee_ranks <= 0:
        return None
    found = leaders_callees(ranked, repo, settings.callee_ranks)
    return node_recall(CALLEES, found, settings.callgraph_limit, "callees of the leading functions")


def neighbour_worth(
    repo: Repo, identifiers: Iterable[str], candidates: Iterable[Candidate], memo: RetrievalMemo
) -> tuple[float, ...]:
    """Per candidate, ``1 / n`` when it is one hop from a definition of a named
    identifier that n definitions share (the best over the names that reach
    it), else 0; names shared by more than ``RARE_NAMESAKES`` are skipped.

    The same neighbours as :func:`neighbours`, tested from the candidates'
    side: a popular seed has thousands of callers, the candidates are a few
    dozen, and asking each whether it calls the seed is what stays cheap.
    Neither the seeds nor a candidate's worth depends on the pool: ``memo``
    keeps them for the retrieval's second pass.
    """
    seeds = memo.get(SOURCE, "seeds", partial(_seeds, repo, tuple(identifiers)))
    if not seeds:
        return tuple(0.0 for _ in candidates)
    return tuple(
        memo.get(SOURCE, (c.span, c.kind, c.qualname), partial(_worth, repo, c, seeds))
        for c in candidates
    )


# A named definition: its worth, the names it calls, and the definitions it
# contains, sits in, or imports and uses, by (path, qualname).
_Seed = tuple[Node, float, frozenset[str], frozenset[tuple[str, str]]]


def _seeds(repo: Repo, identifiers: tuple[str, ...]) -> list[_Seed]:
    index = repo.index
    seeds: list[_Seed] = []
    for identifier in dict.fromkeys(identifiers):
        named = definitions(index.lookup(identifier))
        if not named or len(named) > RARE_NAMESAKES:
            continue
        for seed in named:
            called = frozenset(
                e.target.rsplit(".", 1)[-1] for e in index.edges_from(seed) if e.kind == "invoke"
            )
            around = [*definitions(index.children(seed)), *_container(repo, seed),
                      *imported(repo, seed)]
            seeds.append((seed, 1 / len(named), called,
                          frozenset((n.span.path, n.qualname) for n in around)))
    return seeds


def _worth(repo: Repo, candidate: Candidate, seeds: list[_Seed]) -> float:
    node = node_of(candidate, repo) if candidate.kind in DEFINITION_KINDS else None
    if node is None:
        return 0.0
    calls = {e.target.rsplit(".", 1)[-1] for e in repo.index.edges_from(node) if e.kind == "invoke"}
    key = (node.span.path, node.qualname)
    return max(
        (worth for seed, worth, called, around in seeds
         if node.name in called or seed.name in calls or key in around),
        default=0.0,
    )


@hookimpl
def signals(
    query: Query,
    candidates: tuple[Candidate, ...],
    repo: Repo,
    settings: Settings,
    memo: RetrievalMemo,
) -> list[Signal] | None:
    if settings.signal_weight("neighbour", settings.neighbour_boost) == 0:
        return None  # a weight of 0 changes no score: skip the lookups
    values = neighbour_worth(repo, query.identifiers, candidates, memo)
    return [Signal("neighbour", values, settings.neighbour_boost, "scale")]
