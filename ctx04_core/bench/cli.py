"""The benchmark commands: ``ctx04 eval``, ``ctx04 ab`` and ``ctx04 ablate``.

:func:`register` adds them to the ``ctx04`` Typer app. The measuring code
(trees, gold, the systems) is imported inside the commands so ``ctx04
--help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ctx04_core.console import fail, stderr
from ctx04_core.executors import Executor, ExecutorKind

if TYPE_CHECKING:
    from ctx04_core.bench.compare import Decision, Paired
    from ctx04_core.bench.dataset import Instance
    from ctx04_core.bench.metrics import Summary
    from ctx04_core.bench.runner import RunConfig
    from ctx04_core.settings import Settings

DEFAULT_ABLATIONS = ("ripgrep", "apidesc", "callgraph", "bm25", "traceback", "rerank", "prune")


class SystemName(StrEnum):
    ctx04 = "ctx04"
    bm25 = "bm25"


DatasetOption = Annotated[
    Path | None,
    typer.Option("--dataset", help="SWE-bench JSON Lines: instance_id, repo, base_commit, "
                 "problem_statement, patch."),
]
ReposOption = Annotated[
    Path | None,
    typer.Option("--repos", help='JSON mapping "owner/name" to a local git directory '
                 "(a bare repository or a .git folder)."),
]
IdsOption = Annotated[
    Path | None, typer.Option("--ids", help="Evaluate only these instances: one id a line.")
]
LimitOption = Annotated[
    int | None, typer.Option("--limit", min=1, help="Evaluate only the first N instances.")
]
BudgetOption = Annotated[
    int | None,
    typer.Option("--budget", "-b", min=1, help="Token budget of the slice \\[default: 4000]."),
]
DisableOption = Annotated[
    list[str] | None,
    typer.Option("--disable", "-d", help="Disable a ctx04 plugin by name (repeatable)."),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set", help="Override a setting for this run, NAME=VALUE (repeatable); "
        "see ctx04_core/settings.py.",
    ),
]
JobsOption = Annotated[
    int,
    typer.Option(
        "--jobs", "-j", min=1,
        help="Run this many at once, each in its own local process (about one per core); "
        "the results are the same as one after another.",
    ),
]
ExecutorOption = Annotated[
    ExecutorKind,
    typer.Option(
        "--executor",
        help="local: on this machine (see --jobs); ray: as Ray tasks, needs ctx04\\[ray]. "
        "Ray's workers are given paths, not files: they must see the repositories and "
        "caches at the same paths as this machine (this machine's own cluster, or nodes "
        "sharing a file system), with ctx04 installed.",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="The Ray cluster to join: auto (the one this machine belongs to) or "
        "HOST:PORT. Without it, --executor ray starts a local cluster for the run.",
    ),
]
CacheDirOption = Annotated[
    Path | None,
    typer.Option("--cache-dir", help="Where materialised base commits are kept "
                 "\\[default: the per-user cache folder, ctx04/trees]."),
]


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("ab")(ab_command)
    app.command("ablate")(ablate_command)
    app.command("gaps")(gaps_command)


def eval_command(
    dataset: DatasetOption = None,
    repos: ReposOption = None,
    ids: IdsOption = None,
    limit: LimitOption = None,
    disable: DisableOption = None,
    system: Annotated[
        SystemName,
        typer.Option(
            "--system", help="ctx04, or the plain BM25 baseline (needs ctx04\\[bench])."
        ),
    ] = SystemName.ctx04,
    budget: BudgetOption = None,
    assignments: SetOption = None,
    cache_dir: CacheDirOption = None,
    jobs: JobsOption = 1,
    executor: ExecutorOption = ExecutorKind.local,
    ray_address: RayAddressOption = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the per-instance records here (JSONL).")
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option("--compare", help="Compare two records files instead: A B, deltas B − A."),
    ] = None,
    fold_models: Annotated[
        Path | None,
        typer.Option(
            "--fold-models",
            help="Rank each task with the model `ctx04 train --fold-models DIR` fitted "
                 "without its repository: training tasks read held out.",
        ),
    ] = None,
) -> None:
    """Measure retrieval on SWE-bench tasks against the gold of each patch.

    Materialises each base commit from the mapped git directory (cached),
    derives gold files, lines and symbols from the patch, runs the system and
    prints the summary: file Acc@1/5/10, function Acc@5/10, recall@1/3/5,
    MRR, required file/symbol recall, irrelevant-context ratio, tokens, wall
    time p50/p95 and index build time.

    Example: ctx04 eval --dataset dev.jsonl --repos repos.json --limit 10 --out run.jsonl

    With --compare A.jsonl B.jsonl: the two runs' summaries side by side,
    and for each metric how many instances B scores above A and below it (a
    mean that moves with one instance is one task, not a trend), the 95 %
    interval of the mean change (paired, normal approximation) and the
    exact sign test of those counts: an interval that spans 0, or a p above
    0.05, is a change these instances cannot tell from chance.

    When the dataset gives each task's language, the metrics are also shown
    per language (with --compare: each language's deltas B − A).

    With --jobs N or --executor ray the records are the same as a serial
    run's apart from the timings, in dataset order; an instance whose worker
    died on each of 3 attempts is recorded as an error and the run goes on.

    With --fold-models DIR (from ctx04 train --fold-models DIR) each training
    task is ranked by the model fitted without its repository, so the slice's
    metrics (line recall, irrelevant share, tokens) read held out, as the
    cross-validation reads the ranking.
    """
    if compare is not None:
        if dataset or repos or out:
            fail("--compare takes two records files; it does not run (drop --dataset/--out)")
        _compare(*compare)
        return
    if dataset is None or repos is None or out is None:
        fail("eval needs --dataset, --repos and --out (or --compare A B)")
    from ctx04_core.bench.runner import RunConfig

    config = RunConfig(
        system=system.value, settings=_settings(budget, assignments), disable=tuple(disable or ()),
        executor=executor_of(jobs, executor, ray_address), **cache_option(cache_dir),
        fold_models=fold_models,
    )
    instances, repo_map = load_inputs(dataset, repos, ids, limit)
    with running(config.executor):
        records = _run(instances, repo_map, config, out, system.value)
    from ctx04_core.bench.metrics import METRICS, summarise, summarise_by_language

    title = f"{system.value}" + (f" without {', '.join(config.disable)}" if config.disable else "")
    _show_summary(summarise(records), title)
    by_language = summarise_by_language(records)
    if by_language:
        _show_languages("per language:", [
            (language, summary.instances, [_value(m, summary.means[m]) for m in METRICS])
            for language, summary in by_language.items()
        ])
    Console().print(f"[dim]records: {escape(str(out))}[/]")


def ab_command(
    current: Annotated[Path, typer.Option("--current", help="Records of the current system.")],
    candidate: Annotated[
        Path, typer.Option("--candidate", help="Records of the candidate system.")
    ],
    current_e2e: Annotated[
        Path | None,
        typer.Option("--current-e2e", help="The current system's e2e report "
                     "(ctx04 e2e report writes RUN_DIR/e2e-report.json)."),
    ] = None,
    candidate_e2e: Annotated[
        Path | None,
        typer.Option("--candidate-e2e", help="The candidate system's e2e report."),
    ] = None,
    e2e_arm: Annotated[
        str, typer.Option("--e2e-arm", help="The e2e reports' arm to compare.")
    ] = "retrieved",
) -> None:
    """The spec §7.4 decision: does the candidate win against the current system?

    Win iff one of recall@1/3/5, MRR, required file/symbol recall and line
    recall strictly improves, none regresses, the irrelevant-context ratio
    and tokens do not rise, and the end-to-end guards hold: resolve rate not
    lower, cost and tokens per instance at most 1.5× current. The guards come
    from each system's e2e report (--current-e2e, --candidate-e2e: ctx04 e2e
    run, the SWE-bench harness, ctx04 e2e report), or from records that
    carry resolved/cost/e2e_tokens. Without them the guards are "not
    measured" and the verdict says the end-to-end half was not run ("win on
    retrieval only", still exit 0). Exit 0 on win, 1 on lose, 2 on bad input.
    """
    from ctx04_core.bench.compare import Paired, ab_decision

    if (current_e2e is None) != (candidate_e2e is None):
        fail("--current-e2e and --candidate-e2e go together: one e2e report per system")
    paired = _paired(current, candidate)
    if not paired.a:
        fail(f"{current} and {candidate} have no instance in common")
    if current_e2e is not None and candidate_e2e is not None:
        from ctx04_core.bench.e2e_report import ReportError, load_report, with_e2e

        try:
            paired = Paired(
                with_e2e(paired.a, load_report(current_e2e), e2e_arm),
                with_e2e(paired.b, load_report(candidate_e2e), e2e_arm),
                paired.only_a, paired.only_b,
            )
        except ReportError as err:
            fail(str(err))
    decision = ab_decision(paired)
    _show_decision(decision, paired)
    if not decision.win:
        raise typer.Exit(1)


def ablate_command(
    dataset: DatasetOption = None,
    repos: ReposOption = None,
    ids: IdsOption = None,
    limit: LimitOption = None,
    plugins: Annotated[
        str,
        typer.Option("--plugins", help="Comma-separated plugins to disable, one at a time."),
    ] = ",".join(DEFAULT_ABLATIONS),
    budget: BudgetOption = None,
    assignments: SetOption = None,
    cache_dir: CacheDirOption = None,
    jobs: JobsOption = 1,
    executor: ExecutorOption = ExecutorKind.local,
    ray_address: RayAddressOption = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out-dir", help="Write full.jsonl and no-<plugin>.jsonl here."),
    ] = None,
) -> None:
    """Disable each plugin in turn, everything else fixed, and give the ablation verdict.

    Runs ctx04 with every plugin, then once without each of --plugins; prints
    each removal's deltas against the full run and "delete" when no metric
    moved beyond noise (|Δ| ≤ 5 % of the full run's value, Δ = 0 when it is
    0), else "keep".
    """
    if dataset is None or repos is None or out_dir is None:
        fail("ablate needs --dataset, --repos and --out-dir")
    from ctx04_core.bench.compare import ablation_verdict
    from ctx04_core.bench.metrics import summarise
    from ctx04_core.bench.runner import RunConfig

    names = [name.strip() for name in plugins.split(",") if name.strip()]
    if not names:
        fail("--plugins names no plugin")
    instances, repo_map = load_inputs(dataset, repos, ids, limit)
    settings = _settings(budget, assignments)
    where = executor_of(jobs, executor, ray_address)
    runs: dict[str, Summary] = {}
    with running(where):
        for label, disable in [("full", ()), *((f"no-{n}", (n,)) for n in names)]:
            config = RunConfig(system="ctx04", settings=settings, disable=disable,
                               executor=where, **cache_option(cache_dir))
            records = _run(instances, repo_map, config, out_dir / f"{label}.jsonl", label)
            runs[label] = summarise(records)
    full = runs.pop("full")
    verdicts = {label: ablation_verdict(full, summary) for label, summary in runs.items()}
    _show_ablation(full, runs, verdicts)


def gaps_command(
    records: Annotated[
        list[Path], typer.Argument(help="Records files of ctx04 eval --out, each shown on its own.")
    ],
) -> None:
    """Where a run's slices miss the gold lines, and what each rank's shown lines hold.

    Places: each gold line once, in the first place that holds it (the slice
    shows it; the first candidate, one of ranks 2-5, one past 5 holds it, a
    class or module only its own lines; a ranked class or module holds it in
    a member no candidate is; a file the slice shows, a ranked file it
    drops, a file no candidate is in), as shares of each instance's gold
    lines averaged over the run; "shown" is the run's line recall. A row per
    language when the records carry one. Lines held by a leading candidate
    but not shown are the slice's to win; lines in a member no candidate is,
    or in no candidate's file, the ranking's and recall's.

    By rank: the slice's lines by the rank of the candidate they show, then
    by what the slice added beside them (reserve: the learned order's
    functions past top_k; head: the leading file's lines before its first
    definition; called: signatures of called definitions; no candidate:
    those of records older than that distinction): lines per instance, the
    share irrelevant (as irrelevant_context_ratio counts a line, pooled over
    the group) and the line recall they give (summing to the run's). Needs
    records made since shown lines carry their rank.
    """
    from ctx04_core.bench.compare import RecordsError, load_records

    for path in records:
        try:
            run = load_records(path)
        except RecordsError as err:
            fail(str(err))
        try:
            _show_places(path, run)
            _show_by_rank(path, run)
        except (KeyError, TypeError, ValueError) as err:
            fail(f"{path}: a record lacks the gold, ranked or shown lines ctx04 gaps reads "
                 f"({type(err).__name__}: {err})")


def _show_places(path: Path, run: list[dict[str, Any]]) -> None:
    from ctx04_core.bench.gaps import PLACES, places
    from ctx04_core.bench.metrics import by_language

    table = Table()
    table.add_column("instances")
    table.add_column("n", justify="right")
    for place in PLACES:
        table.add_column(place, justify="right")
    groups: list[tuple[str, Sequence[Mapping[str, Any]]]] = [("all", run)]
    for name, members in groups + list(by_language(run).items()):
        shares = places(members)
        table.add_row(escape(name), str(len(members)), *(f"{shares[p]:.3f}" for p in PLACES))
    _print_whole(table, f"{escape(str(path))}: where the gold lines are")


def _show_by_rank(path: Path, run: list[dict[str, Any]]) -> None:
    from ctx04_core.bench.gaps import by_rank

    groups = by_rank(run)
    title = f"{escape(str(path))}: the slice's lines by rank"
    if groups is None:
        Console().print(f"{title}: not in these records (made before shown lines carried a rank)")
        return
    table = Table()
    for name, justify in (("rank", "left"), ("lines/instance", "right"),
                          ("irrelevant", "right"), ("line recall", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for group in groups:
        irrelevant = "-" if group.irrelevant is None else f"{group.irrelevant:.3f}"
        table.add_row(group.name, f"{group.lines_per_instance:.1f}", irrelevant,
                      f"{group.line_recall:.3f}")
    _print_whole(table, title)


def executor_of(jobs: int, kind: ExecutorKind, ray_address: str | None) -> Executor:
    """The executor the --jobs, --executor and --ray-address options choose."""
    if kind is ExecutorKind.ray and jobs > 1:
        fail("--jobs is for --executor local; Ray runs as many tasks at once as the "
              "cluster has CPUs")
    if kind is ExecutorKind.local and ray_address is not None:
        fail("--ray-address needs --executor ray")
    return Executor(kind, jobs, ray_address)


@contextmanager
def running(executor: Executor) -> Iterator[None]:
    """The executor's session (one Ray cluster for the command); failing to start it is
    a one-line error."""
    from ctx04_core.executors import ExecutorError, session

    try:
        with session(executor):
            yield
    except ExecutorError as err:
        fail(str(err))


def _settings(budget: int | None, assignments: list[str] | None) -> Settings:
    from ctx04_core.settings import Settings

    try:
        settings = Settings() if budget is None else Settings(budget_tokens=budget)
        return settings.with_assignments(assignments or [])
    except ValueError as err:
        fail(str(err))


def cache_option(cache_dir: Path | None) -> dict[str, Any]:
    return {} if cache_dir is None else {"cache_dir": cache_dir}


def load_inputs(
    dataset: Path, repos: Path, ids: Path | None, limit: int | None
) -> tuple[list[Instance], dict[str, Path]]:
    from ctx04_core.bench.dataset import DatasetError, load_instances, load_repo_map

    try:
        instances = load_instances(dataset, ids, limit)
        repo_map = load_repo_map(repos)
    except DatasetError as err:
        fail(str(err))
    if not instances:
        fail(f"{dataset}: no instance to evaluate")
    return instances, repo_map


def _run(
    instances: Sequence[Instance], repo_map: dict[str, Path], config: RunConfig, out: Path,
    label: str,
) -> list[dict[str, Any]]:
    from ctx04_core.bench.runner import RunError, run

    with progress(len(instances), label) as advance:
        try:
            return run(
                instances, repo_map, config, out,
                lambda record: advance(record["instance_id"], record["error"] is None),
            )
        except RunError as err:
            fail(str(err))
        except OSError as err:
            fail(f"cannot write {out}: {err.strerror or err}")


@contextmanager
def progress(total: int, label: str) -> Iterator[Callable[[str, bool], None]]:
    """A progress bar on stderr, one step per finished item: ``advance(name, ok)``
    shows the item and its outcome (only on a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), "{task.fields[last]}", console=stderr, transient=True,
        disable=not stderr.is_terminal,
    ) as bar:
        task_id = bar.add_task(escape(label), total=total, last="")

        def advance(name: str, ok: bool) -> None:
            outcome = "[green]ok[/]" if ok else "[red]error[/]"
            bar.update(task_id, advance=1, last=f"{escape(name)} {outcome}")

        yield advance


def _paired(a: Path, b: Path) -> Paired:
    from ctx04_core.bench.compare import RecordsError, load_records, pair

    try:
        return pair(load_records(a), load_records(b))
    except RecordsError as err:
        fail(str(err))


def _value(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if metric in ("tokens", "e2e_tokens") else f"{value:.3f}"


def _delta(metric: str, delta: float | None) -> str:
    if delta is None:
        return "-"
    return f"{delta:+.1f}" if metric in ("tokens", "e2e_tokens") else f"{delta:+.3f}"


def _p_value(p: float) -> str:
    return "< 0.01" if p < 0.005 else f"{p:.2f}"


def _timing(summary: Summary) -> list[tuple[str, float | None]]:
    return [
        ("seconds_p50", summary.seconds_p50),
        ("seconds_p95", summary.seconds_p95),
        ("index_seconds_median", summary.index_seconds_median),
        ("index_seconds_total", summary.index_seconds_total),
    ]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _show_summary(summary: Summary, title: str) -> None:
    from ctx04_core.bench.metrics import METRICS

    console = Console()
    console.print(
        f"ctx04 eval: {escape(title)}: {summary.instances} instances, {summary.errors} errored"
    )
    if summary.unavailable:
        reported = ", ".join(f"{escape(reason)} {n}" for reason, n in summary.unavailable.items())
        console.print(f"unavailable in retrieval, instances by reason: {reported} "
                      "(each record's `unavailable` says what)")
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    for metric in METRICS:
        table.add_row(metric, _value(metric, summary.means[metric]))
    for name, value in summary.given_file.items():
        table.add_row(f"{name} ({summary.given_file_instances})", _value(name, value))
    for name, seconds in _timing(summary):
        table.add_row(name, _seconds(seconds))
    console.print(table)


# Column names of the per-language table (one column per metric), as docs/benchmarks.md
# names them, so a row fits a terminal line.
SHORT_NAMES = {
    "file_acc@1": "file@1", "file_acc@5": "file@5", "file_acc@10": "file@10",
    "function_acc@5": "fn@5", "function_acc@10": "fn@10", "function_acc_read@5": "fnr@5",
    "function_acc_read@10": "fnr@10", "recall@1": "r@1",
    "recall@3": "r@3", "recall@5": "r@5", "mrr": "MRR", "required_file_recall": "file rec",
    "required_symbol_recall": "sym rec", "line_recall": "lines", "line_recall@1": "lines@1",
    "line_recall@3": "lines@3", "line_recall@5": "lines@5", "line_recall@10": "lines@10",
    "own_line_recall@5": "own lines@5",
    "file_recall@20": "files@20", "irrelevant_context_ratio": "irrel",
    "tokens": "tokens",
}


def _show_languages(title: str, rows: list[tuple[str, int, list[str]]]) -> None:
    """A table of (language, instances, one cell per metric) rows."""
    from ctx04_core.bench.metrics import METRICS

    table = Table()
    table.add_column("language")
    table.add_column("n", justify="right")
    for metric in METRICS:
        table.add_column(SHORT_NAMES[metric], justify="right")
    for language, count, cells in rows:
        table.add_row(escape(language), str(count), *cells)
    _print_whole(table, title)


def _print_whole(table: Table, title: str) -> None:
    """Rich would crop a table wider than the console (80 columns in a log
    file): print it whole, and let a narrow terminal wrap its lines."""
    from rich.measure import Measurement

    console = Console()
    wide = Measurement.get(console, console.options.update_width(1000), table).maximum
    if wide > console.width:
        console = Console(width=wide)
    console.print(title)
    console.print(table)


def _compare(a: Path, b: Path) -> None:
    from ctx04_core.bench.compare import delta_interval, doubt_split, moved, sign_test
    from ctx04_core.bench.metrics import METRICS, summarise, summarise_by_language

    paired = _paired(a, b)
    if not paired.a:
        fail(f"{a} and {b} have no instance in common")
    first, second = summarise(paired.a), summarise(paired.b)
    table = Table()
    for column in ("metric", f"A {escape(a.name)}", f"B {escape(b.name)}", "Δ (B − A)",
                   "Δ 95 % interval", "instances up / down", "sign test p"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for metric in METRICS:
        x, y = first.means[metric], second.means[metric]
        up, down = moved(paired, metric)
        low, high = delta_interval(paired, metric)
        table.add_row(metric, _value(metric, x), _value(metric, y), _delta(metric, y - x),
                      f"{_delta(metric, low)} .. {_delta(metric, high)}", f"{up} / {down}",
                      _p_value(sign_test(up, down)))
    for name in first.given_file:
        x_g, y_g = first.given_file[name], second.given_file[name]
        table.add_row(
            name, _value(name, x_g), _value(name, y_g),
            _delta(name, None if x_g is None or y_g is None else y_g - x_g), "-", "-", "-",
        )
    for (name, x_s), (_, y_s) in zip(_timing(first), _timing(second), strict=True):
        delta = None if x_s is None or y_s is None else y_s - x_s
        table.add_row(name, _seconds(x_s), _seconds(y_s),
                      "-" if delta is None else f"{delta:+.2f}", "-", "-", "-")
    _print_whole(table, (
        f"ctx04 eval --compare: {len(paired.a)} instances in both "
        f"(only in A: {paired.only_a}, only in B: {paired.only_b}); "
        f"errored: A {first.errors}, B {second.errors}"
    ))
    console = Console()
    split = doubt_split(paired, "line_recall")
    if split is not None:
        console.print(
            f"line_recall Δ by the slice's doubt gate: {split.kept_delta:+.3f} from the "
            f"{split.kept} instances whose slice it decided alike, {split.crossed_delta:+.3f} "
            f"from the {split.entered + split.left} that crossed it ({split.entered} into "
            f"doubt, {split.left} out)"
        )
    first_by = summarise_by_language(paired.a)
    if first_by:
        # Each pair is grouped under A's language, so both runs split alike.
        second_by = summarise_by_language([
            y | {"language": x.get("language")} for x, y in zip(paired.a, paired.b, strict=True)
        ])
        _show_languages("per language, Δ (B − A):", [
            (language, x_l.instances,
             [_delta(m, second_by[language].means[m] - x_l.means[m]) for m in METRICS])
            for language, x_l in first_by.items()
        ])


def _show_decision(decision: Decision, paired: Paired) -> None:
    console = Console()
    console.print(
        f"ctx04 ab (spec §7.4) over {len(paired.a)} instances in both "
        f"(only current: {paired.only_a}, only candidate: {paired.only_b})"
    )
    table = Table()
    for column in ("metric", "current", "candidate", "Δ", "rule", "outcome"):
        table.add_column(column, justify="right" if column in ("current", "candidate", "Δ")
                         else "left")
    for row in decision.rows:
        style = "green" if row.improves else ("red" if not row.ok else "")
        outcome = f"[{style}]{row.outcome}[/]" if style else row.outcome
        table.add_row(row.metric, _value(row.metric, row.current),
                      _value(row.metric, row.candidate), _delta(row.metric, row.delta),
                      row.rule, outcome)
    console.print(table)
    verdict = "[bold green]win[/]" if decision.win else "[bold red]lose[/]"
    if decision.win and not decision.e2e_measured:
        verdict = "[bold yellow]win on retrieval only[/]"
    console.print(f"{verdict}: {escape(decision.reason)}")


def _show_ablation(
    full: Summary, runs: dict[str, Summary], verdicts: dict[str, tuple[str, list[str]]]
) -> None:
    from ctx04_core.bench.metrics import METRICS

    console = Console()
    console.print(
        f"ctx04 ablate: {full.instances} instances, {full.errors} errored in the full run; "
        "Δ = without the plugin − full"
    )
    table = Table()
    table.add_column("metric")
    table.add_column("full", justify="right")
    for label in runs:
        table.add_column(f"Δ {label}", justify="right")
    for metric in METRICS:
        table.add_row(metric, _value(metric, full.means[metric]), *(
            _delta(metric, summary.means[metric] - full.means[metric])
            for summary in runs.values()
        ))
    table.add_row("verdict", "", *(verdicts[label][0] for label in runs))
    console.print(table)
    for label, (verdict, moved) in verdicts.items():
        why = f"moved beyond noise: {', '.join(moved)}" if moved else "no metric moved beyond noise"
        console.print(f"{label.removeprefix('no-')}: {verdict} ({why})")
