"""The hooks a ctx04 plugin can implement, in pipeline order.

A plugin is a module (or object) with functions decorated ``@hookimpl``,
published under the entry-point group ``ctx04``; the entry-point name is the
plugin's name for ``--disable`` and ``CTX04_DISABLE``. Hooks marked
``firstresult`` stop at the first implementation that returns something other
than None (the most recently registered runs first); the others are called on
every enabled plugin and their results collected into a list.

Arguments are passed by keyword, so an implementation may accept any subset
of a hook's parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ctx04_core.memo import RetrievalMemo
    from ctx04_core.repository import Repo
    from ctx04_core.settings import Settings
    from ctx04_core.types import (
        Candidate,
        ContextSlice,
        Decision,
        Described,
        Diagnostic,
        Evidence,
        Excerpt,
        Node,
        NodeValues,
        Observation,
        ParsedFile,
        Query,
        RankedCandidate,
        Recall,
        Signal,
    )

PROJECT = "ctx04"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def source_globs() -> list[str] | None:
    """File globs (``*.py``) of the source files this plugin can parse.

    Called once per index refresh and once per retrieval; collected. The
    union decides which files the index walks and which files lexical recall
    searches. A parser plugin implements it alongside :func:`parse_file`; a
    plugin may also name files it only wants searched (the bundled
    ``unparsed`` plugin does), which the index lists as ``no_parser``.
    """


@hookspec(firstresult=True)
def parse_file(path: str, text: str, settings: Settings) -> ParsedFile | None:
    """Extract definitions and references from one source file.

    Called by the index for every new or changed file matched by
    :func:`source_globs`. ``path`` is repo-relative with forward slashes,
    ``text`` the file decoded as UTF-8. Return None for a file in a language
    the plugin does not handle, so the next parser is asked. Raise
    ``SyntaxError`` for a file in its language that does not parse: the index
    records the failure and the file stays searchable by lexical recall. A
    parser that recovers from errors (tree-sitter's; the Python parser, from
    a few lines) returns what it recovered with ``error_lines`` set instead:
    the index keeps the nodes and lists the file as ``partial``. Raise
    ``ctx04_core.parse_budget.TooComplex`` for a file over the settings' parse
    budget (a ``ParseBudget`` made from ``settings`` on entry keeps it): the
    index lists it as ``too_complex`` with the reason. First result wins.
    """


@hookspec
def node_values(
    path: str, lines: tuple[str, ...], parsed: ParsedFile, settings: Settings
) -> list[NodeValues] | None:
    """Derive values from each definition of a file while the index records it.

    Called by the index refresh for every file :func:`parse_file` (re)parsed,
    on every enabled plugin, with the file's lines and what was parsed from
    them; collected. Each :class:`~ctx04_core.types.NodeValues` holds one
    value (bytes) or None per node of ``parsed``, in its order, under a key
    in the plugin's own namespace. The index keeps every value with its node:
    replaced when the file is parsed again, dropped when the file is removed.
    A reader gets them with ``CodeIndex.node_values(key, nodes)`` and may add
    what is missing with ``CodeIndex.store_node_values`` (nodes of files
    indexed while the plugin was disabled have none). Return None to store
    nothing. An exception ends the refresh with nothing written, so raise only
    for a configuration the user must fix.
    """


@hookspec
def describe_query(query: Query, repo: Repo, settings: Settings) -> Described | None:
    """Add descriptions of the code the task needs to the query, before recall.

    Called once per retrieval on every enabled plugin, after the query is
    built from the task and the code index refreshed, before :func:`recall`;
    collected. The core appends each returned
    :class:`~ctx04_core.types.Description` to ``Query.descriptions`` in the
    order of the results: whitespace folded, empty ones and repeats dropped,
    each cut to ``settings.max_description_chars`` and all of them to
    ``settings.max_query_descriptions`` (a cut is an ``omitted`` diagnostic).
    Every later hook sees that query; recall plugins search the descriptions
    (the bundled ``apidesc`` against the index's descriptions) and mark what
    they find with each description's ``source``. A description is query
    text only: it never becomes a path, an option or a command. The returned
    ``diagnostics`` join the coverage diagnostics: a plugin that asks a model
    reports a failed call there, with no description, and never raises.
    Return None to add nothing (not configured, not allowed).
    """


@hookspec
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    """Propose candidate code regions for the query.

    Called once per retrieval on every enabled recall plugin, after the code
    index has been refreshed; results are collected and merged by the core
    (collapse by definition, containment, union of overlapping line runs).
    A candidate may be a single hit line: merge widens it to its enclosing
    definition. Return None to contribute nothing. Report cut or failed
    searches as ``Diagnostic(kind="unavailable", ...)`` in the result rather
    than raising.

    ``Recall.placed`` holds candidates no signal can weigh (what the plugin
    knows of the repository, not of the task: the changelog most fixes
    update). They skip merge, signals and fusion: the core places each whose
    file the ranking lacks as its ``settings.placed_file_position``-th file
    (``ctx04_core/stages/place.py``), named in the ranking, not shown.
    """


@hookspec
def signals(
    query: Query,
    candidates: tuple[Candidate, ...],
    repo: Repo,
    settings: Settings,
    memo: RetrievalMemo,
) -> list[Signal] | None:
    """Score the merged candidates on named pieces of ranking evidence.

    Called on every enabled plugin after merge, with the merged candidates
    in a deterministic order; collected: once per retrieval, and once more
    over the grown pool when :func:`expand` proposed candidates. Each returned
    :class:`~ctx04_core.types.Signal` holds one value per candidate, in the
    order given, and a default weight. The core fuses every signal into one
    score (``ctx04_core.stages.fuse``): the sum of the ``add`` signals'
    weighted values, times ``1 + weight * value`` of each ``scale`` signal;
    then it keeps the best ``settings.top_k``. Signal names are unique across
    plugins; ``settings.signal_weights`` overrides a weight by name, and
    disabling the plugin removes its signals (the ablation). Return None to
    contribute nothing. With no signal at all the merged order is kept.

    ``memo`` is the same :class:`~ctx04_core.memo.RetrievalMemo` in both
    passes of one retrieval: what a value depends on apart from the pool (a
    candidate's text, the task's term weights) need not be computed twice.
    """


@hookspec
def expand(
    query: Query, ranked: tuple[RankedCandidate, ...], repo: Repo, settings: Settings
) -> Recall | None:
    """Propose more candidates once a first ranking exists.

    Called once per retrieval on every enabled plugin, after the recalled
    candidates' signals are fused, with that first ranking (the best
    ``settings.top_k``); collected. What it proposes is merged with the
    recalled candidates, and :func:`signals` are computed and fused again
    over all of them, so an expansion competes on the same terms as a
    recall. For evidence that only means something next to the leading
    candidates: the members of a leading class, the rest of a leading file.
    Return None to propose nothing.
    """


@hookspec(firstresult=True)
def prune(
    query: Query,
    ranked: tuple[RankedCandidate, ...],
    reserve: tuple[RankedCandidate, ...],
    repo: Repo,
    settings: Settings,
) -> list[Excerpt] | None:
    """Cut each ranked candidate down to the lines that serve the task.

    Called once per retrieval after the signals are fused and the best
    ``settings.top_k`` kept. ``reserve`` is the rest of the learned order
    (ranks past ``top_k``, each with its model score; empty under the
    weighted fusion): never candidates of the answer, but an excerpt may
    show one. Returns one excerpt per candidate that should stay, in rank
    order, then any from the reserve; a candidate left out is dropped.
    Whole lines only, never a partial statement. First result wins; with no
    implementation enabled every candidate is shown whole.
    """


@hookspec
def dependent_lines(excerpt: Excerpt, repo: Repo, settings: Settings) -> list[int] | None:
    """Lines of the excerpt's candidate that its shown lines depend on, or that
    depend on them (spec §3.5 rule 3: data and control dependence).

    Called once per excerpt that :func:`prune` returned, after prune and
    before assemble, on every enabled plugin; collected. The core shows the
    union of the returned line numbers as well, keeping only lines inside the
    candidate's span; a plugin adds lines, never removes one. Return whole
    statements (the core does not widen what it is given), and None to add
    nothing.
    """


@hookspec
def called_definitions(excerpt: Excerpt, repo: Repo, settings: Settings) -> list[Node] | None:
    """The definitions that the excerpt's shown lines call (spec §3.5 rule 3:
    a retained call site pulls its one-line signature, not its body).

    Called once per excerpt, in rank order, after :func:`dependent_lines`, on
    every enabled plugin; collected. The core shows each definition's
    signature (its decorator and header lines, a long header by its first
    line) as an entry of its own after the ranked candidates' entries, ranked
    after them with score 0 and source ``called``: each definition once, in
    the order found, at most ``settings.call_signatures_limit`` (a cut is an
    ``unavailable``/``truncated`` diagnostic), none that is a ranked
    candidate. The token cap drops these entries before any ranked one.
    Return None to add nothing.
    """


@hookspec(firstresult=True)
def assemble(
    query: Query,
    excerpts: tuple[Excerpt, ...],
    diagnostics: tuple[Diagnostic, ...],
    repo: Repo,
    settings: Settings,
) -> ContextSlice | None:
    """Render the excerpts into the context slice within the budgets.

    Called once per retrieval, last, with the coverage diagnostics so far
    (recall, refused files). The returned slice's ``tokens`` is the token
    count of exactly its ``text`` and never exceeds ``settings.budget_tokens``
    (the pipeline checks this); its ``diagnostics`` are the given ones plus
    what the caps omitted, and its text ends with their summary. Each entry
    carries the evidence (source reference and text) it rendered. First
    result wins; at least one implementation must be enabled.
    """


@hookspec(firstresult=True)
def select(observation: Observation, repo: Repo, settings: Settings) -> Decision | None:
    """Judge which observed candidates the task wants: the decision door.

    Called once per retrieval, after :func:`assemble`, with the observable
    record of every excerpt the slice offered (in its order) and of every
    refused file, never their content. Return a
    :class:`~ctx04_core.types.Decision`: its ``call`` says what was asked and
    how it ended, and a ``selection`` when the door ranked. The core then
    renders the picked excerpts first and keeps exactly the excerpts the
    deterministic order showed, so a door reorders evidence and never erases
    it. A door that is not configured returns a call with outcome
    ``skipped`` and the reason, so the output can say why nothing ranked;
    None leaves the question to the next implementation. First result wins.
    """


@hookspec
def vet(artifact: str, evidence: tuple[Evidence, ...]) -> str | None:
    """Check an artifact a model produced against the retrieved blocks it was shown.

    Called on every enabled plugin whenever a harness vets an artifact (an
    edit, a command, a proposed tool) before it becomes state; collected.
    ``evidence`` holds every block rendered to the model, each with its
    source reference. Return a rejection reason, or None to pass. Any
    rejection rejects the artifact.
    """
