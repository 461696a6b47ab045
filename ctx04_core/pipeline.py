"""Runs the stages in order: index refresh, query, recall, merge, signals and fusion,
prune, assemble."""

from __future__ import annotations

import functools
import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pluggy

from ctx04_core.graph import definitions_within, module_of
from ctx04_core.index import CodeIndex, RefreshStats, statuses
from ctx04_core.index.schema import is_corruption
from ctx04_core.memo import RetrievalMemo
from ctx04_core.paths import nameable
from ctx04_core.plugins import PluginError, enabled_plugins, given_or_chosen
from ctx04_core.repository import (
    BINARY_REASON,
    NOT_UTF8_REASON,
    Repo,
    git_base,
    resolve_root,
    too_large_reason,
)
from ctx04_core.selection import observe, picked_order, shown_ranks
from ctx04_core.settings import Settings
from ctx04_core.stages.fuse import fuse, fused_order, ranking_model
from ctx04_core.stages.merge import merge
from ctx04_core.stages.place import place
from ctx04_core.stages.query import build_query, extensions_of
from ctx04_core.stages.regions import span_text
from ctx04_core.stages.shapes import lines_shown, statement_lines
from ctx04_core.stages.templates import template_lines, without_template_lines
from ctx04_core.types import (
    SIGNATURE,
    WHOLE,
    Candidate,
    ContextSlice,
    Decision,
    Described,
    Description,
    Diagnostic,
    Excerpt,
    Node,
    Query,
    RankedCandidate,
    Recall,
    Signal,
)

# The source of a signature entry: a definition that a shown line calls.
CALLED = "called"
# The source a placed leading module names (ctx04_core/stages/place.py).
LEADING_MODULE = "leading_module"


class TaskError(ValueError):
    """The task is empty or cannot be read."""


@dataclass(frozen=True)
class Retrieval:
    """One retrieval's full result; :func:`ctx04_core.output.to_json` renders it."""

    root: Path
    base: str | None
    query: Query
    settings: Settings
    candidates: tuple[RankedCandidate, ...]
    context: ContextSlice
    diagnostics: tuple[Diagnostic, ...]
    index: RefreshStats
    recalled: dict[str, int]  # candidates each recall source proposed, before merge
    plugins: tuple[str, ...]  # the enabled plugins, by entry-point name
    seconds: float
    decision: Decision | None = None  # the decision door's call, when a door is enabled


def open_repo(
    root: Path,
    pm: pluggy.PluginManager,
    settings: Settings,
    index_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Repo, RefreshStats]:
    """Open the repository's code index and bring it up to date."""
    index = CodeIndex.open(root, index_dir)
    try:
        return refreshed_repo(index, pm, settings, progress)
    except BaseException:
        index.close()
        raise


def refreshed_repo(
    index: CodeIndex,
    pm: pluggy.PluginManager,
    settings: Settings,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Repo, RefreshStats]:
    """Bring an open index up to date; the repository as the stages see it."""
    globs = tuple(sorted({g for found in pm.hook.source_globs() for g in found or ()}))
    stats = index.refresh(pm, globs, settings, progress)
    base, trouble = git_base(index.root)
    # A file over the parse budget has no definitions in the index: every
    # retrieval's coverage says so, as it names the files it may not read.
    notes = (() if trouble is None else (trouble,)) + tuple(
        Diagnostic("omitted", "parse budget", path, message)
        for path, status, message in stats.failures if status == statuses.TOO_COMPLEX
    )
    excluded = {
        path: unusable_reason(status, message, settings)
        for path, status, message in stats.failures
        if status in statuses.UNUSABLE
    }
    return Repo(index.root, index, globs, settings.max_file_bytes, base, notes, excluded), stats


def unusable_reason(status: str, message: str, settings: Settings) -> str:
    """The same wording Repo.source uses, so a refusal reads alike wherever found."""
    return {
        statuses.TOO_LARGE: too_large_reason(settings.max_file_bytes),
        statuses.BINARY: BINARY_REASON,
        statuses.NOT_UTF8: NOT_UTF8_REASON,
        statuses.REFUSED: message,
    }.get(status, f"unreadable: {message}")


def retrieve(
    task: str,
    repo: str | Path,
    *,
    latest_error: str | None = None,
    test: str | None = None,
    settings: Settings | None = None,
    disable: Iterable[str] = (),
    only: Iterable[str] | None = None,
    index_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    plugins: pluggy.PluginManager | None = None,
) -> Retrieval:
    """Retrieve the context slice for ``task`` from the repository at ``repo``.

    ``disable`` and ``only`` choose plugins by entry-point name (``only``
    loads just those); ``CTX04_DISABLE`` adds to ``disable``. A process that
    retrieves many times passes the ``plugins`` it loaded once
    (:func:`ctx04_core.plugins.loaded_plugins`) instead: the entry points are
    then not read again, so a plugin installed meanwhile cannot change or
    break the later retrievals.
    """
    started = time.perf_counter()
    settings = settings or Settings()
    task, latest_error, test, notes = checked_task(task, latest_error, test, settings)
    root = resolve_root(repo)
    pm = given_or_chosen(plugins, disable, only, "retrieve")
    require_assemble(pm)

    def attempt() -> Retrieval:
        workspace, stats = open_repo(root, pm, settings, index_dir, progress)
        try:
            return retrieve_in(
                workspace, stats, pm, task, latest_error=latest_error, test=test,
                settings=settings, notes=notes, started=started,
            )
        finally:
            workspace.index.close()

    return rebuilt_once(attempt, lambda err: CodeIndex.discard(root, index_dir, err))


def rebuilt_once(
    attempt: Callable[[], Retrieval], discard: Callable[[sqlite3.DatabaseError], str]
) -> Retrieval:
    """``attempt()``, run again once after ``discard`` when the index proves damaged.

    Damage past what opening checks (a page a query reads): the index is a
    cache, so it is moved aside and rebuilt; the result says so.
    """
    try:
        return attempt()
    except sqlite3.DatabaseError as err:
        if not is_corruption(err):
            raise
        note = discard(err)
        result = attempt()
        return replace(result, index=replace(result.index, recovered=note))


def checked_task(
    task: str, latest_error: str | None, test: str | None, settings: Settings
) -> tuple[str, str | None, str | None, tuple[Diagnostic, ...]]:
    """The task, error and test texts made valid UTF-8 and cut to their budget, and
    what was escaped or cut; an empty task is refused.

    Every caller's text enters here (command-line bytes decoded with
    ``surrogateescape``, a file's, a client's), so that every output built
    from the query (JSON, markdown, the trace) can encode it.
    """
    if not task.strip():
        raise TaskError("the task is empty: give the issue text, a --task-file or an --error-file")
    task, notes = _admitted(task, "task", settings)
    if latest_error is not None:
        latest_error, more = _admitted(latest_error, "error", settings)
        notes += more
    if test is not None:
        test, more = _admitted(test, "test", settings)
        notes += more
    return task, latest_error, test, notes


def require_assemble(pm: pluggy.PluginManager) -> None:
    if not pm.hook.assemble.get_hookimpls():
        raise PluginError("no enabled plugin implements 'assemble'; the slice cannot be built")


def retrieve_in(
    workspace: Repo,
    stats: RefreshStats,
    pm: pluggy.PluginManager,
    task: str,
    *,
    latest_error: str | None,
    test: str | None,
    settings: Settings,
    notes: tuple[Diagnostic, ...],
    started: float,
) -> Retrieval:
    """Query and run the stages over an opened, refreshed repository (the task checked)."""
    defined = workspace.index.defined()
    searched, dropped = without_template_lines(task, template_lines(workspace))
    if dropped:
        # Short enough for the slice's coverage line (60 characters an item).
        notes += (
            Diagnostic("omitted", "issue template", detail=f"{dropped} task lines not searched"),
        )
    query = build_query(
        searched,
        latest_error=latest_error,
        repro_target=test,
        names=defined,
        settings=settings,
        extensions=extensions_of(workspace.index.paths()),
        respelled=defined.respelled,
    )
    stages = run_stages(pm, query, workspace, settings, notes)
    return Retrieval(
        root=workspace.root,
        base=workspace.base,
        query=stages.query,
        settings=settings,
        candidates=stages.ranked,
        context=stages.context,
        diagnostics=stages.diagnostics,
        index=stats,
        recalled=stages.recalled,
        plugins=enabled_plugins(pm),
        seconds=time.perf_counter() - started,
        decision=stages.decision,
    )


@dataclass(frozen=True)
class StageResult:
    query: Query  # as recall saw it: with the descriptions plugins added
    context: ContextSlice
    ranked: tuple[RankedCandidate, ...]
    diagnostics: tuple[Diagnostic, ...]
    recalled: dict[str, int]
    decision: Decision | None = None


def run_stages(
    pm: pluggy.PluginManager,
    query: Query,
    repo: Repo,
    settings: Settings,
    notes: tuple[Diagnostic, ...] = (),
) -> StageResult:
    """Describe the query, recall, merge, rank by the fused signals, prune, assemble
    and ask the decision door over an opened repository; ``notes`` are
    diagnostics from before the stages (a cut task)."""
    hook: Any = pm.hook
    recalled: list[Candidate] = []
    placed: list[Candidate] = []
    counts: dict[str, int] = {}
    diagnostics: list[Diagnostic] = list(notes)
    unnameable: set[str] = set()
    model, unavailable = ranking_model(settings)
    diagnostics.extend(unavailable)
    query, described = described_query(
        query, hook.describe_query(query=query, repo=repo, settings=settings), settings
    )
    diagnostics.extend(described)

    def collect(results: list[Recall | None]) -> bool:
        """Add the results to what was recalled; True when they proposed anything."""
        proposed = False
        for result in results:
            if result is not None:
                usable = [c for c in result.candidates if nameable(c.span.path)]
                proposed = proposed or bool(usable)
                recalled.extend(usable)
                placed.extend(c for c in result.placed if nameable(c.span.path))
                diagnostics.extend(result.diagnostics)
                every = (*result.candidates, *result.placed)
                for path in dict.fromkeys(c.span.path for c in every):
                    if not nameable(path) and path not in unnameable:
                        unnameable.add(path)
                        diagnostics.append(_unnameable(path))
                counts[result.source] = counts.get(result.source, 0) + len(usable)
        return proposed

    collect(hook.recall(query=query, repo=repo, settings=settings))
    # The weighted fusion's ranking chooses what to expand, with or without a
    # model: the training pools were expanded that way, and the model then
    # ranks once, over the final pool. When nothing was expanded that pool is
    # the one already merged and scored, so the model reads its signals.
    memo = RetrievalMemo()
    merged = merge(recalled, repo)
    signals = _signals(hook, query, merged, repo, settings, memo)
    ranked = fuse(merged, signals, settings)
    reserve: list[RankedCandidate] = []
    expanded = collect(hook.expand(query=query, ranked=tuple(ranked), repo=repo, settings=settings))
    if expanded:
        merged = merge(recalled, repo)
        signals = _signals(hook, query, merged, repo, settings, memo)
    if expanded or model is not None:
        fused = fused_order(merged, signals, settings, task_text=query.task_text, model=model)
        ranked, reserve = fused[: settings.top_k], fused[settings.top_k :]
    excerpts: list[Excerpt] | None = hook.prune(
        query=query, ranked=tuple(ranked), reserve=tuple(reserve), repo=repo, settings=settings
    )
    if excerpts is None:
        excerpts = [whole_excerpt(r, repo) for r in ranked]
        excerpts = [e for e in excerpts if e.lines]
    placement = place(
        ranked, placed, settings, _leading_module(ranked, repo, settings),
        functools.partial(definitions_within, repo),
    )
    ranked = list(placement.ranked)
    # In rank order still when a module shown further down moved up.
    excerpts = sorted(
        (_with_dependences(hook, placement.renumbered(e), repo, settings) for e in excerpts),
        key=lambda e: e.ranked.rank,
    )
    signatures, cut = _call_signatures(hook, excerpts, ranked, repo, settings)
    excerpts.extend(signatures)
    covered = tuple(diagnostics) + cut + repo.diagnostics
    context = _assembled(hook, query, tuple(excerpts), covered, repo, settings)
    decision: Decision | None = hook.select(
        observation=observe(query.task_text, context), repo=repo, settings=settings
    )
    if decision is not None and decision.selection is not None:
        order = picked_order(context, decision.selection)
        ranked_context = _assembled(hook, query, order, covered, repo, settings)
        if shown_ranks(ranked_context) == shown_ranks(context):
            context = ranked_context
        else:
            # The same excerpts have the same bytes, but a tokenizer may count
            # their joins differently and an assemble plugin may cap by
            # order: whatever the cause, a door reorders or changes nothing.
            decision = Decision(replace(
                decision.call, outcome="failed",
                reason="the picked order would change which excerpts fit the budgets",
            ))
    return StageResult(
        query, context, tuple(ranked), context.diagnostics, dict(sorted(counts.items())), decision
    )


def _leading_module(
    ranked: list[RankedCandidate], repo: Repo, settings: Settings
) -> Candidate | None:
    """The module of the first candidate's file, as a candidate; None when
    placing it is off, the ranking is empty or the file has no module (a
    language without one)."""
    if not settings.leading_module_rank or not ranked:
        return None
    module = module_of(repo, ranked[0].candidate.span.path)
    if module is None:
        return None
    return Candidate(module.span, module.kind, module.qualname, (LEADING_MODULE,))


def described_query(
    query: Query, results: Iterable[Described | None], settings: Settings
) -> tuple[Query, tuple[Diagnostic, ...]]:
    """The query with the descriptions the ``describe_query`` plugins returned, and
    their diagnostics: whitespace folded, lone surrogates escaped, empty ones and
    repeats dropped, each at most ``settings.max_description_chars``, at most
    ``settings.max_query_descriptions`` (a cut is an ``omitted`` diagnostic)."""
    chars, most = settings.max_description_chars, settings.max_query_descriptions
    kept = {d.text.casefold(): d for d in query.descriptions}
    notes: list[Diagnostic] = []
    dropped = cut = 0
    for result in results:
        if result is None:
            continue
        notes.extend(result.diagnostics)
        for description in result.descriptions:
            # A model's JSON may hold a lone surrogate: escaped, as a task's is.
            text = escaped(" ".join(description.text.split()))[0]
            shortened = text[:chars].rstrip()
            if not shortened or shortened.casefold() in kept:
                continue
            if len(kept) >= most:
                dropped += 1
                continue
            cut += shortened != text
            kept[shortened.casefold()] = Description(shortened, description.source)
    if cut:
        notes.append(Diagnostic(
            "omitted", "description budget",
            detail=f"{cut} descriptions cut to max_description_chars ({chars})",
        ))
    if dropped:
        notes.append(Diagnostic(
            "omitted", "description budget",
            detail=f"{dropped} descriptions past max_query_descriptions ({most}) not searched",
        ))
    return replace(query, descriptions=tuple(kept.values())), tuple(notes)


def _assembled(
    hook: Any, query: Query, excerpts: tuple[Excerpt, ...], diagnostics: tuple[Diagnostic, ...],
    repo: Repo, settings: Settings,
) -> ContextSlice:
    context: ContextSlice = hook.assemble(
        query=query, excerpts=excerpts, diagnostics=diagnostics, repo=repo, settings=settings
    )
    if context.tokens > settings.budget_tokens:
        raise AssertionError(
            f"assemble plugin broke the token cap: {context.tokens} > {settings.budget_tokens}"
        )
    return context


def _admitted(text: str, what: str, settings: Settings) -> tuple[str, tuple[Diagnostic, ...]]:
    """``text`` made valid UTF-8, then cut to ``settings.max_task_chars``; a
    diagnostic for each change.

    Every stage scores the task's terms against every candidate, so a task of
    megabytes (a pasted log) would cost minutes; its head says what it is about.
    The cut says where, not how much it dropped: a file is read no further.
    """
    text, escapes = escaped(text)
    notes: tuple[Diagnostic, ...] = ()
    if escapes:
        notes += (Diagnostic(
            "excluded", f"{what} text is not valid UTF-8",
            detail=f"{len(escapes)} escaped, first {escapes[0]}",
        ),)
    if len(text) > settings.max_task_chars:
        text = text[: settings.max_task_chars]
        notes += (Diagnostic(
            "omitted", "task text budget",
            detail=f"the {what} text was cut to its first {settings.max_task_chars} characters",
        ),)
    return text, notes


# Half of a surrogate pair, alone: a character no UTF-8 encoder accepts.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escaped(text: str) -> tuple[str, list[str]]:
    """``text`` with each lone surrogate written as a backslash escape, and the escapes.

    ``surrogateescape`` decoding (command-line arguments, files the user
    names, ripgrep's paths) keeps each undecodable byte as a surrogate
    U+DC80..U+DCFF: it is written as that byte (``\\xff``); any other
    surrogate as its code point (``\\ud800``).
    """
    escapes: list[str] = []

    def escape(match: re.Match[str]) -> str:
        point = ord(match.group())
        written = f"\\x{point - 0xDC00:02x}" if 0xDC80 <= point <= 0xDCFF else f"\\u{point:04x}"
        escapes.append(written)
        return written

    return _LONE_SURROGATE.sub(escape, text), escapes


def _unnameable(path: str) -> Diagnostic:
    """The refusal of a file whose name is not UTF-8, its bytes shown as escapes."""
    return Diagnostic("excluded", "file name is not valid UTF-8", escaped(path)[0])


def _signals(
    hook: Any, query: Query, merged: tuple[Candidate, ...], repo: Repo, settings: Settings,
    memo: RetrievalMemo,
) -> list[Signal]:
    """Every plugin's signals over the merged candidates."""
    contributed = hook.signals(
        query=query, candidates=merged, repo=repo, settings=settings, memo=memo
    )
    return [s for found in contributed for s in found or ()]


def _with_dependences(hook: Any, excerpt: Excerpt, repo: Repo, settings: Settings) -> Excerpt:
    """The excerpt and the lines of its candidate that plugins say its lines depend on."""
    found = hook.dependent_lines(excerpt=excerpt, repo=repo, settings=settings)
    span = excerpt.ranked.candidate.span
    text = dict(excerpt.lines)
    added = {
        n for lines in found for n in lines or ()
        if span.start_line <= n <= span.end_line and n not in text
    }
    source = repo.source(span.path) if added else None
    if source is None:
        return excerpt
    text.update((n, source.lines[n - 1]) for n in added if n <= len(source.lines))
    return replace(excerpt, lines=tuple(sorted(text.items())))


def _call_signatures(
    hook: Any,
    excerpts: list[Excerpt],
    ranked: list[RankedCandidate],
    repo: Repo,
    settings: Settings,
) -> tuple[list[Excerpt], tuple[Diagnostic, ...]]:
    """The signature of each definition the excerpts' shown lines call, as
    excerpts ranked after the last candidate or excerpt (the ``called_definitions`` hook),
    and the cut when there were more than ``settings.call_signatures_limit``."""
    limit = settings.call_signatures_limit
    if limit == 0:
        return [], ()
    # The candidates, and the reserve's that an excerpt shows.
    shown = [r.candidate for r in ranked] + [e.ranked.candidate for e in excerpts]
    candidates = {(c.span, c.qualname) for c in shown}
    last_rank = max([len(ranked)] + [e.ranked.rank for e in excerpts])
    called: dict[Node, None] = {}
    for excerpt in excerpts:
        found = hook.called_definitions(excerpt=excerpt, repo=repo, settings=settings)
        for node in (n for nodes in found for n in nodes or ()):
            if (node.span, node.qualname) not in candidates:
                called.setdefault(node)
    # A signature an excerpt already shows (beside the first candidate's lines) is not repeated.
    seen = lines_shown(excerpts)
    signatures: list[Excerpt] = []
    for node in list(called)[:limit]:
        source = repo.source(node.span.path)
        if source is None:
            continue
        header = statement_lines(node.span.start_line, node.header_end,
                                 settings.max_statement_lines)
        lines = tuple((n, source.lines[n - 1]) for n in header if n <= len(source.lines))
        if lines and not {n for n, _ in lines} <= seen.get(node.span.path, set()):
            candidate = Candidate(node.span, node.kind, node.qualname, (CALLED,))
            rank = last_rank + len(signatures) + 1
            signatures.append(Excerpt(RankedCandidate(candidate, rank, 0.0), lines, SIGNATURE))
    cut: tuple[Diagnostic, ...] = ()
    if len(called) > limit:
        cut = (Diagnostic("unavailable", "truncated", detail=(
            f"{len(called)} definitions called from shown lines, kept the first {limit} signatures"
        )),)
    return signatures, cut


def whole_excerpt(ranked: RankedCandidate, repo: Repo) -> Excerpt:
    """The candidate's full span, as shown when no prune plugin is enabled."""
    return Excerpt(ranked, tuple(span_text(ranked.candidate, repo)), WHOLE)
