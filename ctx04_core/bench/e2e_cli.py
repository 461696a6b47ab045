"""``ctx04 e2e run`` and ``ctx04 e2e report``: the end-to-end half of the A/B protocol.

The work is in :mod:`ctx04_core.bench.e2e` and :mod:`ctx04_core.bench.e2e_report`,
imported inside the commands so ``ctx04 --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ctx04_core.bench.cli import (
    BudgetOption,
    CacheDirOption,
    DatasetOption,
    DisableOption,
    IdsOption,
    LimitOption,
    ReposOption,
    SetOption,
    cache_option,
    load_inputs,
    progress,
)
from ctx04_core.console import fail

app = typer.Typer(
    name="e2e",
    help="The end-to-end half of the A/B protocol (spec §7.2-7.4): a model patches each "
    "task with ctx04's slice, the gold (oracle) slice and no context; the SWE-bench "
    "harness judges the patches; report reads its verdicts back.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


@app.command("run")
def run_command(
    dataset: DatasetOption = None,
    repos: ReposOption = None,
    ids: IdsOption = None,
    limit: LimitOption = None,
    disable: DisableOption = None,
    arms: Annotated[
        str,
        typer.Option(
            "--arms", help="Comma-separated arms: retrieved (ctx04's slice), oracle (the "
            "gold regions, same budget and rendering), none (no retrieved context).",
        ),
    ] = "retrieved,oracle",
    budget: BudgetOption = None,
    assignments: SetOption = None,
    cache_dir: CacheDirOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Folder for ARM.jsonl (one per arm) and calls.jsonl."),
    ] = None,
) -> None:
    """Ask a model for a patch per task and arm; write SWE-bench predictions files.

    The model is the one the decision door uses: --set model_url=URL --set
    model=NAME (or CTX04_MODEL_URL, CTX04_MODEL; the key from
    CTX04_MODEL_API_KEY), any OpenAI-compatible chat-completions server. Its
    calls here default to model_timeout_s=300, model_max_output_tokens=4096
    and a 1 MiB answer; --set overrides them, and prices the calls
    (model_usd_per_mtok_input, model_usd_per_mtok_output).

    Each answer (search/replace blocks or a unified diff) becomes a diff of
    the base tree, checked with git apply --check, and passes the vetting
    gate against the slice the model was shown. OUT gets one predictions
    file per arm (instance_id, model_name_or_path, model_patch; "" when the
    call gave no usable patch) and calls.jsonl (each call's arm, outcome,
    reason, tokens, seconds and cost).

    Example: ctx04 e2e run --dataset dev.jsonl --repos repos.json --set
    model_url=http://127.0.0.1:8000/v1 --set model=qwen2.5-coder --arms
    retrieved,oracle,none --out e2e/

    Then: python -m swebench.harness.run_evaluation --predictions_path
    e2e/retrieved.jsonl --run_id retrieved (and the same per arm), and ctx04
    e2e report e2e/ --resolved retrieved=REPORT.json --resolved oracle=...
    """
    if dataset is None or repos is None or out is None:
        fail("e2e run needs --dataset, --repos and --out")
    from ctx04_core.bench.e2e import E2EConfig, E2EError, check_config, e2e_settings, run_e2e

    try:
        settings = e2e_settings(assignments or [], budget)
    except ValueError as err:
        fail(str(err))
    config = E2EConfig(
        settings=settings, arms=tuple(a.strip() for a in arms.split(",") if a.strip()),
        disable=tuple(disable or ()), **cache_option(cache_dir),
    )
    try:
        check_config(config)
    except E2EError as err:
        fail(str(err))
    instances, repo_map = load_inputs(dataset, repos, ids, limit)
    from ctx04_core.plugins import PluginError

    with progress(len(instances) * len(config.arms), "e2e") as advance:
        try:
            calls = run_e2e(
                instances, repo_map, config, out,
                lambda r: advance(f"{r['instance_id']} {r['arm']}", r["outcome"] == "patch"),
            )
        except (E2EError, PluginError) as err:
            fail(str(err))
        except OSError as err:
            fail(f"cannot write {out}: {err.strerror or err}")
    _show_calls(calls, config.arms)
    files = ", ".join(f"{arm}.jsonl" for arm in config.arms)
    Console().print(f"[dim]predictions: {escape(str(out))}/{{{escape(files)}}}; "
                    f"calls: {escape(str(out / 'calls.jsonl'))}[/]")


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="The folder ctx04 e2e run wrote.")],
    resolved: Annotated[
        list[str] | None,
        typer.Option(
            "--resolved", help="ARM=REPORT.json: the SWE-bench harness's report for that "
            "arm's predictions (its resolved_ids). Repeatable, one per arm.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write the e2e report here \\[default: RUN_DIR/e2e-report.json]."
        ),
    ] = None,
) -> None:
    """The §7.2 oracle diagnostic and the §7.3 figures from the harness's verdicts.

    Per arm: instances, resolved, resolve rate, cost and tokens per instance,
    and how the calls ended. With the retrieved and the oracle arm's reports:
    the partition into retrieval failure (oracle resolved, retrieved not),
    reasoning failure (neither), not the bottleneck (both) and curation beats
    the gold slice (retrieved resolved, oracle not).

    Writes RUN_DIR/e2e-report.json, which ctx04 ab reads (--current-e2e,
    --candidate-e2e) for its end-to-end guards.

    Example: ctx04 e2e report e2e/ --resolved retrieved=m+ctx04-retrieved.retrieved.json
    --resolved oracle=m+ctx04-oracle.oracle.json
    """
    from ctx04_core.bench.e2e_report import (
        REPORT,
        ReportError,
        build_report,
        load_calls,
        load_resolved,
    )

    given: dict[str, tuple[set[str], set[str] | None]] = {}
    sources: dict[str, str] = {}
    try:
        calls = load_calls(run_dir)
        for item in resolved or []:
            arm, sep, where = item.partition("=")
            if not sep or not arm.strip() or not where:
                fail(f"--resolved takes ARM=REPORT.json, not {item!r}")
            if arm.strip() in given:
                fail(f"--resolved names the {arm.strip()} arm twice")
            given[arm.strip()] = load_resolved(Path(where))
            sources[arm.strip()] = where
        report = build_report(calls, given, sources)
    except ReportError as err:
        fail(str(err))
    target = out or run_dir / REPORT
    try:
        target.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as err:
        fail(f"cannot write {target}: {err.strerror or err}")
    _show_report(report)
    Console().print(f"[dim]report: {escape(str(target))}[/]")


def _show_calls(calls: list[dict[str, Any]], arms: tuple[str, ...]) -> None:
    from ctx04_core.bench.e2e_report import build_report

    report = build_report(calls, {}, {})
    console = Console()
    console.print(f"ctx04 e2e run: {len({c['instance_id'] for c in calls})} instances, "
                  f"arms {', '.join(arms)}")
    _figures_table(console, report)


def _show_report(report: dict[str, Any]) -> None:
    console = Console()
    console.print("ctx04 e2e report: spec §7.3, per arm")
    _figures_table(console, report)
    partition = report["partition"]
    if partition is None:
        console.print("§7.2: needs the harness's reports of both the retrieved and the oracle "
                      "arm (--resolved retrieved=... --resolved oracle=...)")
        return
    total = sum(len(ids) for ids in partition.values())
    console.print(f"spec §7.2, the oracle diagnostic over {total} instances"
                  + (f" ({len(report['excluded'])} excluded: no slice in an arm)"
                     if report["excluded"] else ""))
    table = Table()
    for column in ("verdict", "oracle", "retrieved", "instances", "share", "ids"):
        table.add_column(column, justify="right" if column in ("instances", "share") else "left")
    from ctx04_core.bench.e2e_report import VERDICTS

    for name, oracle, retrieved in VERDICTS:
        ids = partition[name]
        share = "-" if not total else f"{len(ids) / total:.3f}"
        shown = ", ".join(ids[:3]) + (", …" if len(ids) > 3 else "")
        table.add_row(name, "resolved" if oracle else "not", "resolved" if retrieved else "not",
                      str(len(ids)), share, escape(shown))
    console.print(table)


def _figures_table(console: Console, report: dict[str, Any]) -> None:
    table = Table()
    for column in ("arm", "instances", "resolved", "resolve rate", "$/instance",
                   "tokens/instance", "outcomes"):
        table.add_column(column, justify="left" if column in ("arm", "outcomes") else "right")
    for arm, figures in report["arms"].items():
        rate = figures["resolve_rate"]
        table.add_row(
            arm, str(figures["instances"]),
            "-" if figures["resolved"] is None else str(figures["resolved"]),
            "-" if rate is None else f"{rate:.3f}", f"{figures['cost_per_instance']:.6f}",
            f"{figures['tokens_per_instance']:.1f}",
            ", ".join(f"{k} {v}" for k, v in figures["outcomes"].items()),
        )
    console.print(table)
