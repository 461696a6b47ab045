"""The ``ctx04`` command line: retrieve, index, plugins.

Heavy modules (the tokenizer, SQLite, the pipeline) are imported inside the
commands so ``ctx04 --help`` starts fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ctx04_core.bench.cli import (
    ExecutorOption,
    JobsOption,
    RayAddressOption,
    SetOption,
    executor_of,
    progress,
    running,
)
from ctx04_core.bench.cli import register as register_bench_commands
from ctx04_core.bench.e2e_cli import app as e2e_app
from ctx04_core.console import fail, stderr
from ctx04_core.executors import ExecutorKind
from ctx04_core.ranking.cli import register as register_train_command
from ctx04_core.regular_file import NotRegularFile, open_regular_file

if TYPE_CHECKING:
    from ctx04_core.executors import Executor
    from ctx04_core.pipeline import Retrieval

app = typer.Typer(
    name="ctx04",
    help=(
        "Given a task and a repository, show the few lines of code a model must see.\n\n"
        "Start with:  ctx04 retrieve \"describe the bug or feature\" --repo PATH"
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def versions(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", help="Print ctx04's installed version and exit.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="With --version: each installed ctx04 plugin's version too."
        ),
    ] = False,
) -> None:
    if version:
        print_versions(verbose)
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        fail("give a command (ctx04 --help lists them)")


def print_versions(verbose: bool) -> None:
    """The version the installed metadata records (what pip installed, not a
    constant in the code), and with ``verbose`` each plugin distribution's."""
    from importlib.metadata import version

    from ctx04_core.plugins import CORE_DISTRIBUTION, installed_entry_points

    sys.stdout.write(f"ctx04 {version(CORE_DISTRIBUTION)}\n")
    if not verbose:
        return
    plugin_distributions = {
        (ep.dist.name, ep.dist.version)
        for ep in installed_entry_points().values()
        if ep.dist is not None and ep.dist.name != CORE_DISTRIBUTION
    }
    for name, plugin_version in sorted(plugin_distributions):
        sys.stdout.write(f"{name} {plugin_version}\n")


class Format(StrEnum):
    table = "table"
    markdown = "markdown"
    json = "json"


class Profile(StrEnum):
    default = "default"
    compact = "compact"


RepoOption = Annotated[
    Path,
    typer.Option(
        "--repo", "-r", help="The repository to search (a folder; git is optional).",
        show_default=True,
    ),
]
IndexDirOption = Annotated[
    Path | None,
    typer.Option(
        "--index-dir",
        help="Keep the code index here instead of the per-user cache folder.",
    ),
]
DisableOption = Annotated[
    list[str] | None,
    typer.Option(
        "--disable", "-d",
        help="Disable a plugin by name (repeatable); see `ctx04 plugins`. "
        "CTX04_DISABLE=a,b does the same.",
    ),
]


def read_user_file(path: Path, what: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a file the user names (``-``: stdin).

    Only a regular file is read: a FIFO or a device may block forever or never
    end, so the file is opened non-blocking and refused unless it is one.
    """
    try:
        if str(path) == "-":
            return sys.stdin.buffer.read(max_bytes)
        with open(open_regular_file(path, os.O_RDONLY), "rb") as file:
            return file.read(max_bytes)
    except NotRegularFile as err:
        fail(f"cannot read {what} {path}: {err} (give - to read stdin)")
    except OSError as err:
        fail(f"cannot read {what} {path}: {err.strerror or err}")


def read_text_file(path: Path, what: str, max_chars: int) -> str:
    """The text of a file the user names, no further than ``max_chars`` + 1
    characters: one past the budget shows the text was cut. Undecodable bytes
    stay surrogates, for the pipeline to escape and report."""
    # A character is at most four bytes of UTF-8.
    data = read_user_file(path, what, 4 * (max_chars + 1))
    return data.decode("utf-8", "surrogateescape")[: max_chars + 1]


@app.command()
def retrieve(
    task: Annotated[
        str | None,
        typer.Argument(help="The task: an issue, a request, a bug report. Or use --task-file."),
    ] = None,
    repo: RepoOption = Path("."),
    task_file: Annotated[
        Path | None,
        typer.Option("--task-file", "-f", help="Read the task from a file (- for stdin)."),
    ] = None,
    error_file: Annotated[
        Path | None,
        typer.Option("--error-file", "-e", help="The latest error or traceback, from a file."),
    ] = None,
    test: Annotated[
        str | None,
        typer.Option(
            "--test", "-t", help="The failing test's node id, e.g. tests/test_x.py::test_y."
        ),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option("--budget", "-b", min=1, help="Token budget of the slice \\[default: 4000]."),
    ] = None,
    disable: DisableOption = None,
    output_format: Annotated[
        Format,
        typer.Option(
            "--format", "-o",
            help="table: ranked candidates and the slice; markdown: the slice alone, "
            "to paste into a prompt; json: everything, schema ctx04.context-slice.v1.",
        ),
    ] = Format.table,
    index_dir: IndexDirOption = None,
    profile: Annotated[
        Profile,
        typer.Option(
            "--profile", "-p",
            help="compact: the source-references budgets (4 search terms, 8 paths, "
            "10 lines, 2 KiB quoted, 8 KiB block).",
        ),
    ] = Profile.default,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Append this retrieval's record (references, diagnostics, manifest) "
            "to a JSON Lines file; `ctx04 vet` reads it.",
        ),
    ] = None,
    assignments: SetOption = None,
) -> None:
    """Retrieve the context slice for a task.

    Builds or refreshes the repository's code index when needed, recalls
    candidate regions (ripgrep, API descriptions, call graph), merges,
    re-ranks, prunes them to the lines that matter and assembles a slice
    within the token budget.

    Settings come from the command line, the environment, the repository's
    ctx04.toml (or [tool.ctx04] in its pyproject.toml) and the user's config
    file, in that order; `ctx04 config` shows them.

    Example: ctx04 retrieve "QuerySet.only() after select_related() crashes" --repo ~/src/django
    """
    from ctx04_core.config import command_line, configured
    from ctx04_core.pipeline import retrieve as run
    from ctx04_core.plugins import plugin_manager, require_recall
    from ctx04_core.repository import resolve_root

    with bad_input_exits_2():
        given = command_line(budget, profile is Profile.compact, assignments)
        layered = configured(resolve_root(repo), given, disable or ())
        settings = layered.settings
    parts = [task or ""]
    if task_file is not None:
        parts.append(read_text_file(task_file, "task file", settings.max_task_chars))
    latest_error = (
        read_text_file(error_file, "error file", settings.max_task_chars) if error_file else None
    )
    task_text = "\n".join(p for p in parts if p.strip())
    if not task_text.strip() and latest_error:
        task_text = latest_error
    with bad_input_exits_2():
        pm = plugin_manager(disable=layered.disable)
        require_recall(pm)
    # Opened before the work, so a trace that cannot be written costs no retrieval.
    trace_file = open_trace_file(trace) if trace is not None else None
    with bad_input_exits_2(), indexing_progress() as progress:
        result = run(
            task_text, repo, latest_error=latest_error, test=test, settings=settings,
            index_dir=index_dir, progress=progress, plugins=pm,
        )
    if trace_file is not None:
        from ctx04_core.trace import trace_line

        try:
            with trace_file:
                trace_file.write(trace_line(result))
        except OSError as err:
            fail(f"cannot write the trace {trace}: {err.strerror or err}")
    if output_format is Format.json:
        from ctx04_core.output import retrieval_json

        sys.stdout.write(json.dumps(retrieval_json(result), indent=2, ensure_ascii=False) + "\n")
    elif output_format is Format.markdown:
        sys.stdout.write(result.context.text)
    else:
        show_retrieval(result)


def open_trace_file(path: Path) -> TextIO:
    """The trace file to append to, created if missing; only a regular file."""
    from ctx04_core.trace import open_trace

    try:
        return open_trace(path)
    except OSError as err:
        fail(f"cannot write the trace {path}: {err.strerror or err}")


@contextmanager
def bad_input_exits_2() -> Iterator[None]:
    """Turn the errors a user can fix into one line and exit code 2."""
    from ctx04_core.index import IndexUnavailable
    from ctx04_core.pipeline import TaskError
    from ctx04_core.plugins import PluginError
    from ctx04_core.repository import RepoError
    from ctx04_core.ripgrep import RipgrepMissing
    from ctx04_core.settings import SettingsError

    try:
        yield
    except (
        RepoError, TaskError, PluginError, IndexUnavailable, RipgrepMissing, SettingsError
    ) as err:
        fail(str(err))


@contextmanager
def indexing_progress() -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr while the index parses files (only on a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=stderr, transient=True, disable=not stderr.is_terminal,
    ) as bar:
        task_id = bar.add_task("indexing", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task_id, completed=done, total=total)

        yield update


def show_retrieval(result: Retrieval) -> None:
    from ctx04_core.candidate_table import candidate_table

    console = Console()
    console.print(candidate_table(result.candidates, result.context.entries, console.width))
    console.print()
    # The slice is shown as the model sees it: no markup, no re-wrapping.
    console.print(Text(result.context.text), soft_wrap=True)
    stats = result.index
    console.print(
        f"[dim]slice {result.context.tokens}/{result.context.budget_tokens} tokens · "
        f"index {stats.files} files ({stats.parsed} parsed) · {result.seconds:.2f} s[/]"
    )
    for diagnostic in result.diagnostics:
        where = f"{diagnostic.path}: " if diagnostic.path else ""
        console.print(
            f"[yellow]{diagnostic.kind}[/] {escape(where + diagnostic.reason)}"
            f"{escape(' (' + diagnostic.detail + ')') if diagnostic.detail else ''}",
            highlight=False,
        )
    if not result.candidates:
        # An empty table says neither why nor what would help.
        console.print(
            "[yellow]no candidate[/]: no name, path, error message or word of the task "
            "occurs in the repository's code; a task that names the function, file or "
            "error it is about gives recall something to find",
            highlight=False,
        )


@app.command()
def index(
    repo: RepoOption = Path("."),
    index_dir: IndexDirOption = None,
    disable: DisableOption = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Also run SQLite's integrity check over the whole index; a damaged "
            "index is moved aside and rebuilt.",
        ),
    ] = False,
    repos: Annotated[
        Path | None,
        typer.Option(
            "--repos",
            help='Index many repositories instead: JSON mapping "owner/name" to a folder, '
            "or to a git directory (indexed at its HEAD), as `ctx04 eval --repos`.",
        ),
    ] = None,
    jobs: JobsOption = 1,
    executor: ExecutorOption = ExecutorKind.local,
    ray_address: RayAddressOption = None,
) -> None:
    """Build or refresh the code index of a repository, or of many (--repos).

    Only files whose bytes changed since the last run are parsed again. The
    index lives in the per-user cache folder (see --index-dir); `ctx04
    retrieve` refreshes it by itself, so this command is for warming it up,
    for seeing what was indexed and, with --check, for repairing it.

    With --repos, each repository gets its own index (with --index-dir, in a
    folder per repository), indexed on the chosen executor; a table gives
    files, parsed, failed and seconds per repository. Exit 1 when one could
    not be indexed.

    Example: ctx04 index --repos repos.json --jobs 2
    """
    where = executor_of(jobs, executor, ray_address)
    if repos is not None:
        if check or repo != Path("."):
            fail("--repos indexes the repositories of its map; it takes no --repo or --check")
        index_many(repos, index_dir, tuple(disable or ()), where)
        return
    if where.kind is ExecutorKind.ray or where.jobs > 1:
        fail("--jobs and --executor are for --repos")
    from ctx04_core.config import configured
    from ctx04_core.index import CodeIndex
    from ctx04_core.pipeline import open_repo
    from ctx04_core.plugins import plugin_manager
    from ctx04_core.repository import resolve_root

    with bad_input_exits_2(), indexing_progress() as progress:
        root = resolve_root(repo)
        layered = configured(root, command_line_disable=disable or ())
        pm = plugin_manager(disable=layered.disable)
        opened, stats = open_repo(root, pm, layered.settings, index_dir, progress)
        problem = opened.index.check() if check else None
        opened.index.close()
        if problem is not None:
            note = CodeIndex.discard(root, index_dir, ValueError(problem))
            opened, stats = open_repo(root, pm, layered.settings, index_dir, progress)
            opened.index.close()
            stats = replace(stats, recovered=note)
    console = Console()
    if check and problem is None:
        console.print("integrity check: ok")
    if stats.recovered:
        console.print(f"[yellow]{escape(stats.recovered)}[/]")
    console.print(stats.summary())
    if stats.languages:
        console.print(
            "languages: " + ", ".join(f"{name} {count}" for name, count in stats.languages),
            highlight=False,
        )
    for path, status, message in stats.failures[:20]:
        console.print(f"  [yellow]{status}[/] {escape(path)}: {escape(message)}", highlight=False)
    if len(stats.failures) > 20:
        console.print(f"  … and {len(stats.failures) - 20} more (see --format json of retrieve)")
    console.print(f"[dim]index file: {opened.index.path}[/]")


def index_many(
    repos: Path, index_dir: Path | None, disable: tuple[str, ...], executor: Executor
) -> None:
    import functools

    from ctx04_core.bench.dataset import DatasetError, load_repo_map
    from ctx04_core.bench.trees import default_cache_dir
    from ctx04_core.executors import WorkerLost, run_tasks
    from ctx04_core.fleet import RepoIndexed, index_repository
    from ctx04_core.plugins import PluginError, loaded_plugins

    try:
        entries = list(load_repo_map(repos).items())
        loaded_plugins(disable)  # an unknown name fails here, once, not in every row
    except (DatasetError, PluginError) as err:
        fail(str(err))
    task = functools.partial(
        index_repository, index_dir=index_dir, disable=disable, tree_cache=default_cache_dir()
    )
    done: list[RepoIndexed | None] = [None] * len(entries)
    with running(executor), progress(len(entries), "indexing") as advance:
        for position, outcome in run_tasks(executor, task, entries):
            name, where = entries[position]
            row = outcome if not isinstance(outcome, WorkerLost) else RepoIndexed(
                name, str(where), 0, 0, 0, 0.0, "", f"worker: {outcome.message}"
            )
            done[position] = row
            advance(name, row.error is None)
    rows = [row for row in done if row is not None]
    table = Table(title=f"ctx04 index: {len(rows)} repositories", title_justify="left")
    for column in ("repository", "files", "parsed", "failed", "seconds", "index file or error"):
        table.add_column(column, justify="left" if column[0] in "ri" else "right",
                         overflow="fold")
    for row in rows:
        table.add_row(
            escape(row.name), str(row.files), str(row.parsed), str(row.failed),
            f"{row.seconds:.2f}",
            f"[red]{escape(row.error)}[/]" if row.error else escape(row.index_file),
        )
    Console().print(table)
    errored = sum(row.error is not None for row in rows)
    if errored:
        stderr.print(f"ctx04 index: {errored} of {len(rows)} repositories not indexed")
        raise typer.Exit(1)


def read_artifact(path: Path) -> str:
    """The artifact's text, of which at most one byte past vet's cap is read:
    enough for vet to refuse a larger one without holding it."""
    from ctx04_core.vetting import MAX_ARTIFACT_BYTES

    data = read_user_file(path, "artifact", MAX_ARTIFACT_BYTES + 1)
    return data.decode("utf-8", "surrogateescape")


@app.command()
def vet(
    artifact: Annotated[
        Path, typer.Argument(help="The file holding what the model produced (- for stdin).")
    ],
    trace: Annotated[
        Path,
        typer.Option(
            "--trace", help="The trace file that `ctx04 retrieve --trace` wrote for the session."
        ),
    ],
    disable: DisableOption = None,
) -> None:
    """Check a model's artifact against everything retrieved in the session.

    Retrieved code is untrusted data, never a template: an artifact that
    reproduces a retrieved block (more than 90% of the artifact's tokens are
    the block's, or it holds more than 90% of the block as one run) is
    rejected with exit code 1. Exit 0 when it passes, 2 on bad input: an
    unreadable trace, or an artifact over vet_max_artifact_bytes (1 MiB),
    which is refused unvetted.

    Example: ctx04 vet patch.diff --trace session.jsonl
    """
    from ctx04_core.pipeline import escaped
    from ctx04_core.vetting import ArtifactTooLarge, TraceError, evidence_from_trace
    from ctx04_core.vetting import vet as judge

    # Escaped as a task is, so no vet plugin is handed text it cannot encode.
    text, _ = escaped(read_artifact(artifact))
    try:
        evidence = evidence_from_trace(trace)
    except TraceError as err:
        fail(str(err))
    with bad_input_exits_2():
        try:
            verdict = judge(text, evidence, disable=disable or ())
        except ArtifactTooLarge as err:
            fail(str(err))
    if verdict.accepted:
        Console().print(f"accepted: checked against {len(evidence)} retrieved blocks")
        return
    for reason in verdict.reasons:
        stderr.print(f"rejected: {escape(reason)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


@app.command()
def plugins(disable: DisableOption = None) -> None:
    """List the installed plugins: name, hooks, distribution, version, enabled.

    Plugins are found through the `ctx04` entry-point group; disable one with
    --disable NAME on any command or CTX04_DISABLE=a,b.
    """
    from ctx04_core.plugins import (
        PluginError,
        describe_plugins,
        missing_default_distributions,
        plugin_manager,
    )

    try:
        pm = plugin_manager(disable=disable or ())
    except PluginError as err:
        fail(str(err))
    table = Table(title="ctx04 plugins (entry-point group 'ctx04')")
    for column in ("name", "hooks", "distribution", "version", "enabled"):
        table.add_column(column)
    for info in describe_plugins(pm):
        table.add_row(
            info.name, ", ".join(info.hooks), info.distribution, info.version,
            "[green]yes[/]" if info.enabled else "[red]no[/]",
        )
    missing = missing_default_distributions()
    for distribution in missing:
        table.add_row("", "", distribution, "", "[red]missing[/]")
    console = Console()
    console.print(table)
    if missing:
        console.print(
            f"{len(missing)} of ctx04's default plugins missing: "
            "pip install ctx04 installs them", highlight=False,
        )


@app.command()
def config(repo: RepoOption = Path(".")) -> None:
    """Print the effective settings for a repository, and where each came from.

    Layers, highest first: the command line (--set NAME=VALUE, --budget,
    --disable, --profile), the environment (the CTX04_* variables), the
    repository file (ctx04.toml at its root, else [tool.ctx04] in its
    pyproject.toml), the user file (config.toml in the platform's config
    folder), the defaults. Each line is a config file's syntax: NAME = VALUE,
    then its source.

    Example: ctx04 config --repo ~/src/django
    """
    from dataclasses import fields

    from ctx04_core.config import DISABLE, as_toml, configured, user_config_file
    from ctx04_core.plugins import disabled_from_env
    from ctx04_core.repository import resolve_root
    from ctx04_core.settings import Settings

    with bad_input_exits_2():
        effective = configured(resolve_root(repo))

    values = {f.name: getattr(effective.settings, f.name) for f in fields(Settings)}
    values[DISABLE] = sorted(set(effective.disable) | disabled_from_env())
    sys.stdout.write(f"# user file: {user_config_file()}\n")
    for name, value in values.items():
        sys.stdout.write(f"{name} = {as_toml(value)}  # {effective.sources[name]}\n")


@app.command()
def mcp(
    repo: Annotated[
        list[Path] | None,
        typer.Option(
            "--repo", "-r",
            help="A repository the server may read (repeatable); the first is the default. "
            "The client's roots may narrow these, never widen them. Without one: the "
            "client's roots, else the current folder.",
        ),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http", metavar="HOST:PORT",
            help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
        ),
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Also append each retrieval's record to this JSON Lines file "
            "(`vet` always checks against the server's own memory of them).",
        ),
    ] = None,
    index_dir: IndexDirOption = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.1, help="Seconds a call may take before it fails."),
    ] = 300.0,
) -> None:
    """Serve retrieve, vet, index and plugins to agents over the Model Context Protocol.

    Stays warm between calls (plugins, tokenizer, each repository's open
    index) and still sees every edit made between them. stdio by default, as
    agents start it; stops when stdin closes or on SIGTERM.

    Example: claude mcp add ctx04 -- ctx04 mcp --repo /path/to/repo
    """
    from ctx04_core.config import configured
    from ctx04_core.mcp_server import Session, serve
    from ctx04_core.plugins import plugin_manager, require_recall
    from ctx04_core.repository import resolve_root

    address = None
    if http is not None:
        host, _, port = http.rpartition(":")
        if not host or not port.isdigit():
            fail(f"--http takes HOST:PORT, e.g. 127.0.0.1:8765, not {http!r}")
        address = (host, int(port))
    with bad_input_exits_2():
        # Refused at start: an agent would take every empty answer for "no relevant code".
        require_recall(plugin_manager())
        roots = [resolve_root(path) for path in repo or ()]
        for root in roots:
            configured(root)  # a bad config file is refused now, not at the first call
    if index_dir is not None and len(roots) != 1:
        fail("--index-dir holds one repository's index: give exactly one --repo with it")
    if trace is not None:
        # Refused at start, as `retrieve` refuses it, not at the first call.
        open_trace_file(trace).close()
    serve(Session(roots, index_dir, trace, timeout), address)


register_bench_commands(app)
app.add_typer(e2e_app)
register_train_command(app)


def main() -> None:
    app()

