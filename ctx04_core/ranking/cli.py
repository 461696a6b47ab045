"""``ctx04 train``: fit the learned ranking on recorded candidate pools."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ctx04_core.console import fail, stderr
from ctx04_core.ranking.features import POOL
from ctx04_core.settings import WEIGHTED, Settings

if TYPE_CHECKING:
    from ctx04_core.ranking.fit import CrossValidation
    from ctx04_core.ranking.table import TaskRows


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)


def train_command(
    pools: Annotated[
        list[Path],
        typer.Argument(help=f"Records of `ctx04 eval --set fusion=weighted --set top_k={POOL} "
                            "--out FILE` on training tasks."),
    ],
    dataset: Annotated[
        list[Path],
        typer.Option("--dataset", help="The tasks' dataset(s) (their texts); repeatable."),
    ],
    out: Annotated[Path, typer.Option("--out", help="Write the chosen model here (JSON).")],
    report: Annotated[
        Path | None,
        typer.Option("--report", help="Also write the cross-validation tables here (Markdown)."),
    ] = None,
    fold_models: Annotated[
        Path | None,
        typer.Option(
            "--fold-models",
            help="Also write here, per repository, the chosen learner fitted without it, "
                 "for `ctx04 eval --fold-models`: the slice read on training tasks held out.",
        ),
    ] = None,
) -> None:
    """Fit the ranking model on training pools, chosen by leave-one-repository-out CV.

    First record each training task's candidate pool (a wide top-k in the
    weighted order, with every signal, recall source and the gold):

      ctx04 eval --dataset train.jsonl --repos repos.json --set fusion=weighted \\
          --set top_k=300 --out pools.jsonl

    then fit: ctx04 train pools.jsonl --dataset train.jsonl --out model.json

    Each learner (logistic regression; LightGBM lambdarank when ctx04\\[train]
    is installed) is fitted with one repository left out at a time and
    measured on that repository's pools, beside the weighted fusion's order
    of the same pools. Of those that keep every metric within 0.01 of the
    weighted order's, the one with the best mean of file Acc@5, function
    Acc@10, own line recall@5 (the changed lines the first five hold, a class
    or module only its own) and MRR over every held-out task is fitted on all
    tasks and written to --out; the same pools give the same file, byte
    for byte. Its scores are calibrated on the held-out repositories' scores
    (Platt scaling), so that the slice's rules can read any learner's score
    as the log-odds that a candidate holds a changed line; the report shows
    how those probabilities read held out, and on how many tasks the leader
    clears the slice's doubt gate. Use it with
    `--set ranking_model=FILE` (the learned fusion is the default).

    The cross-validation reads the ranking; the slice's rules (the doubt
    gate, the body floors) read the model's probabilities, and so do the
    metrics the slice decides: line recall, the irrelevant share, tokens.
    To read those held out, write the fold models and run the training
    tasks with each repository's own:

      ctx04 train pools.jsonl --dataset train.jsonl --out model.json \\
          --fold-models folds/
      ctx04 eval --dataset train.jsonl --repos repos.json --fold-models folds/ \\
          --out held.jsonl
    """
    from ctx04_core.ranking.fit import CV_NOISE, FITTERS, chosen, cross_validate, model_document
    from ctx04_core.ranking.table import task_rows

    texts, splits = _texts(dataset)
    tasks: list[TaskRows] = []
    for path in pools:
        for number, record in _records(path):
            text = texts.get(record.get("instance_id", ""))
            if text is None:
                fail(f"{path}:{number}: {record.get('instance_id')!r} is in no --dataset")
            # The cross-validation reads a pool's order as the weighted order
            # (its baseline, and the files a learned order keeps).
            fusion = (record.get("settings") or {}).get("fusion", WEIGHTED)
            if fusion != WEIGHTED:
                fail(f"{path}:{number}: recorded with fusion {fusion!r}; pools are the "
                     "weighted order's: ctx04 eval --set fusion=weighted --set top_k="
                     f"{POOL} ...")
            rows = task_rows(record, text)
            if rows is not None:
                tasks.append(rows)
    if len({t.repo for t in tasks}) < 2:
        fail("training needs tasks from at least two repositories (one is left out at a time)")
    learners = ["logistic"] + (["lambdarank"] if _has_lightgbm() else [])
    if len(learners) == 1:
        stderr.print("lightgbm is not installed (pip install ctx04[train]): fitting the "
                     "logistic regression only")
    results = []
    with stderr.status("cross-validating") as status:
        for learner in ["weighted", *learners]:
            def fold(done: int, folds: int, repo: str, learner: str = learner) -> None:
                status.update(f"cross-validating {learner}: fold {done + 1} of {folds}, "
                              f"{escape(repo)} held out")

            results += cross_validate(learner, tasks, fold)
    best, holds = chosen(results)
    if not holds:
        stderr.print(f"no learned ranking keeps every metric within {CV_NOISE} of the weighted "
                     f"order's: writing the best, {best.name}; keep fusion = weighted")
    with stderr.status(f"fitting {best.learner} on {len(tasks)} tasks"):
        _, fitted = FITTERS[best.learner](tasks)
    document = model_document(
        best.learner, fitted, best.rank_fusion, len(tasks), best.calibration
    )
    _write_model(out, document)
    if fold_models is not None:
        _write_fold_models(fold_models, tasks, best)
    by_split = {
        name: [t.instance_id for t in tasks if splits[t.instance_id] == name]
        for name in dict.fromkeys(splits[t.instance_id] for t in tasks)
    }
    _show(results, best.name)
    if report is not None:
        report.write_text(markdown_report(results, best.name, by_split), encoding="utf-8")
    Console().print(f"model: {escape(str(out))} ({best.name}, {len(tasks)} tasks)")
    if best.calibration is None:
        stderr.print("not calibrated: its held-out scores tell no changed line apart")
    else:
        Console().print(
            f"calibrated on the held-out scores: log-odds of a changed line = "
            f"{best.calibration.scale:.4g} x score {best.calibration.shift:+.4g}"
        )
    if best.reliability is not None:
        found = best.reliability
        # A learner whose leaders never clear the gate leaves every slice in doubt.
        Console().print(
            f"held out, its leader clears the slice's doubt gate (p >= {found.gate:g}, "
            f">= {found.margin:g}x the next) on "
            f"{found.sure} of {found.sure + found.doubtful} tasks"
        )


def _write_fold_models(
    directory: Path, tasks: list[TaskRows], best: CrossValidation
) -> None:
    """For each repository, ``best``'s learner as its cross-validation fitted it
    without that repository, with ``best``'s rank fusion and calibration (the
    calibration reads every fold's held-out scores, this one's too: two
    numbers, not a ranking)."""
    from ctx04_core.ranking.fit import model_document
    from ctx04_core.ranking.model import fold_model_path

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"--fold-models {directory}: cannot create it ({err.strerror})")
    for repo, fitted in best.fold_fits.items():
        kept = sum(t.repo != repo for t in tasks)
        document = model_document(
            best.learner, fitted, best.rank_fusion, kept, best.calibration
        )
        _write_model(fold_model_path(directory, repo), document)
    Console().print(
        f"fold models: {escape(str(directory))} ({len(best.fold_fits)} repositories)"
    )


def _write_model(path: Path, document: dict[str, Any]) -> None:
    """A model file as `ctx04 train` writes every one: the same document gives
    the same bytes."""
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _texts(datasets: list[Path]) -> tuple[dict[str, str], dict[str, str]]:
    """Each task's text, and the dataset (file name) it is from."""
    from ctx04_core.bench.dataset import DatasetError, load_instances

    texts: dict[str, str] = {}
    splits: dict[str, str] = {}
    for path in datasets:
        try:
            instances = load_instances(path)
        except DatasetError as err:
            fail(str(err))
        for instance in instances:
            texts[instance.instance_id] = instance.problem_statement
            splits[instance.instance_id] = path.name
    return texts, splits


class _PoolsUnreadable(ValueError):
    """A pools file that cannot be read as JSON Lines."""


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON Lines file, with their line numbers."""
    from ctx04_core.bench.jsonl import json_lines

    try:
        found = list(json_lines(path, _PoolsUnreadable))
    except _PoolsUnreadable as err:
        fail(str(err))
    for number, value in found:
        if not isinstance(value, dict):
            fail(f"{path}:{number}: not a JSON object")
    return found


def _has_lightgbm() -> bool:
    import importlib.util

    return importlib.util.find_spec("lightgbm") is not None


def _table(
    results: list[Any], chosen: str, tasks: list[str] | None = None
) -> tuple[list[str], list[list[str]]]:
    """The pooled metrics of each result, over ``tasks`` (by id) or all."""
    from ctx04_core.bench.cli import SHORT_NAMES
    from ctx04_core.ranking.fit import CV_METRICS, mean_metrics

    header = ["ranking", "tasks", *(SHORT_NAMES[m] for m in CV_METRICS)]
    rows = []
    for r in results:
        ids = list(r.per_task) if tasks is None else tasks
        pooled = mean_metrics([r.per_task[task] for task in ids])
        rows.append([r.name + (" (chosen)" if r.name == chosen else ""), str(len(ids)),
                     *(f"{pooled[m]:.3f}" for m in CV_METRICS)])
    return header, rows


def _show(results: list[Any], chosen: str) -> None:
    header, rows = _table(results, chosen)
    table = Table(title="leave-one-repository-out, every held-out task pooled")
    for name in header:
        table.add_column(name, justify="left" if name == "ranking" else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    # Rich would wrap a table wider than the console (80 columns in a log).
    Console(width=200).print(table)


def calibration_table(results: list[Any], by_split: dict[str, list[str]]) -> list[str]:
    """Each learner's held-out calibration and how it reads, as Markdown lines:
    per probability bin "candidates: mean probability / share holding a
    changed line", then the tasks whose leader clears the doubt gate; over
    every held-out task, then over each dataset's when there are several
    (one calibration serves every language: the rows say where it is off)."""
    from ctx04_core.ranking.fit import RELIABILITY_EDGES, reliability

    learners = [r for r in results if r.rank_fusion is None and r.learner != WEIGHTED]
    if not learners:
        return []
    bins = list(pairwise(RELIABILITY_EDGES))
    header = ["learner", "scale", "shift", *(f"p {low:g}-{high:g}" for low, high in bins),
              f"leader p >= {Settings().doubt_probability:g}, "
              f">= {Settings().sure_margin:g}x the next", "its leader right",
              "in doubt, right"]
    lines = [
        "Held-out calibration (each learner's scores of the repositories its folds left "
        "out, as the slice reads them):", "",
        *_markdown_header(header),
    ]
    for r in learners:
        found = r.reliability
        if found is None:
            lines.append(
                _markdown_row([r.learner, "not calibrated", *["-"] * (len(header) - 2)])
            )
            continue
        parts = [(r.learner, found)]
        if len(by_split) > 1:
            parts += [
                (f"{r.learner}, {name}", reliability(
                    [r.held_out[i] for i in ids], r.calibration,
                    found.gate, found.margin,
                ))
                for name, ids in by_split.items()
            ]
        for name, read in parts:
            lines.append(_markdown_row([
                name, f"{r.calibration.scale:.4g}", f"{r.calibration.shift:.4g}",
                *(f"{b.candidates}: {b.mean_probability:.3f} / {b.holding:.3f}"
                  for b in read.bins),
                f"{read.sure} of {read.sure + read.doubtful} tasks",
                f"{read.sure_right / read.sure:.2f}" if read.sure else "-",
                f"{read.doubtful_right / read.doubtful:.2f}" if read.doubtful else "-",
            ]))
    return [*lines, ""]


def markdown_report(results: list[Any], chosen: str, by_split: dict[str, list[str]]) -> str:
    """The pooled table, each dataset's, then each held-out repository's, in Markdown."""
    from ctx04_core.bench.cli import SHORT_NAMES
    from ctx04_core.ranking.fit import CV_METRICS

    lines: list[str] = []
    for title, tasks in [("Every held-out task:", None), *(
        (f"The tasks of {name}:", ids) for name, ids in by_split.items()
    )]:
        header, rows = _table(results, chosen, tasks)
        lines += [title, "", *_markdown_header(header)]
        lines += [_markdown_row(row) for row in rows]
        lines.append("")
    lines += calibration_table(results, by_split)
    lines += ["Per held-out repository:", ""]
    per_header = ["repository", "ranking", *(SHORT_NAMES[m] for m in CV_METRICS)]
    lines += _markdown_header(per_header)
    for repo in sorted(results[0].per_repo):
        for r in results:
            values = r.per_repo[repo]
            lines.append(
                _markdown_row([repo, r.name, *(f"{values[m]:.3f}" for m in CV_METRICS)])
            )
    return "\n".join(lines) + "\n"


def _markdown_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _markdown_header(cells: list[str]) -> list[str]:
    return [_markdown_row(cells), "|" + "---|" * len(cells)]
