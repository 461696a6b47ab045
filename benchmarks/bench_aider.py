"""The peer: aider's repository map against ctx04's warm retrieve, on the same tasks.

    .venv/bin/python benchmarks/bench_aider.py --repo django [--runs 5]

aider is installed into its own virtual environment under the cache folder
(``CACHE/aider-venv-<version>``, made with ``python -m venv`` and ``pip install
aider-chat==<version>`` on first use) and runs there as a child process
(``aider_driver.py``); it is never imported into ctx04's environment.

Per repository, for each of the 10 fixed tasks:

- ctx04: ``retrieve(task, tree, index_dir=...)`` in-process, index warm;
- aider: ``RepoMap(map_tokens=4000, refresh="always").get_repo_map([], files,
  mentioned_fnames, mentioned_idents)`` in-process in the driver, with no
  model (token counts by tiktoken cl100k_base), over the same source files
  ctx04 indexes, on a fresh copy of the tree (aider writes its
  ``.aider.tags.cache`` into the root). Its first call fills that cache and is
  reported once as the cold figure; each task then gets one untimed warm-up.
  The mentioned identifiers are the query's identifiers and unresolved terms
  from ctx04's ``build_query`` (dotted ones split into their parts); the
  mentioned files are the indexed files that the query's file paths name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import benchlib as bl

from ctx04_core import ripgrep
from ctx04_core.pipeline import open_repo, retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.types import Query

DEFAULT_AIDER_VERSION = "0.86.2"
DRIVER = bl.BENCH_DIR / "aider_driver.py"


@dataclass(frozen=True)
class TaskResult:
    task: bl.Task
    idents: int
    fnames: int
    ctx04: bl.Stats
    aider: bl.Stats
    map_tokens: float


@dataclass(frozen=True)
class RepoResult:
    spec: bl.RepoSpec
    files: int
    cold_seconds: float
    tasks: list[TaskResult]
    driver: dict[str, Any]


def add_aider_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--aider-version", default=DEFAULT_AIDER_VERSION,
                        help=f"aider-chat version to install (default {DEFAULT_AIDER_VERSION})")
    parser.add_argument("--map-tokens", type=int, default=4000,
                        help="aider's map budget; ctx04's default budget is 4000 (default 4000)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that creates aider's venv (default: this one)")


def aider_python(args: argparse.Namespace) -> Path:
    """The interpreter of aider's venv, creating and installing it on first use."""
    venv = Path(args.cache_dir) / f"aider-venv-{args.aider_version}"
    python = venv / "bin" / "python"
    marker = venv / "installed.txt"
    if marker.is_file():
        return python
    print(f"installing aider-chat=={args.aider_version} into {venv} (once; a few minutes)",
          file=sys.stderr, flush=True)
    subprocess.run([args.python, "-m", "venv", "--clear", str(venv)], check=True)
    log = venv / "install.log"
    with log.open("wb") as handle:
        # pip's output (and any local index's warnings) goes to the log, not the tables.
        done = subprocess.run(
            [str(python), "-m", "pip", "install", f"aider-chat=={args.aider_version}"],
            stdout=handle, stderr=subprocess.STDOUT, check=False,
        )
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-10:]
        raise SystemExit(f"installing aider-chat failed (see {log}):\n" + "\n".join(tail))
    frozen = subprocess.run(
        [str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    # Written last: its presence means the install finished.
    marker.write_text(frozen, encoding="utf-8")
    return python


def mentions(query: Query, files: list[str]) -> tuple[list[str], list[str]]:
    """aider's mentioned_idents and mentioned_fnames for a ctx04 query."""
    idents: dict[str, None] = {}
    for term in (*query.identifiers, *query.unresolved):
        # aider's graph is keyed by plain names, so Model.save names Model and save.
        for part in term.split("."):
            if part.isidentifier():
                idents.setdefault(part, None)
    fnames: dict[str, None] = {}
    for path in query.file_paths:
        path = path.lstrip("./")
        for rel in files:
            if rel == path or rel.endswith("/" + path):
                fnames.setdefault(rel, None)
    return list(idents), list(fnames)


def aider_jobs(
    tasks: Sequence[bl.Task], names: frozenset[str], files: list[str], settings: Settings
) -> list[dict[str, Any]]:
    """The driver's task list: each task's mentioned identifiers and files."""
    jobs = []
    for task in tasks:
        idents, fnames = mentions(build_query(task.text, names=names, settings=settings), files)
        jobs.append({"id": task.id, "mentioned_idents": idents, "mentioned_fnames": fnames})
    return jobs


def run_aider(
    python: Path, tree: Path, files: list[str], jobs: list[dict[str, Any]],
    args: argparse.Namespace, scratch: Path,
) -> dict[str, Any]:
    """aider's map timed per task by the driver, on a fresh copy of the tree; its report."""
    copy = bl.fresh_copy(tree, scratch / "tree")
    job = {
        "root": str(copy), "files": [str(copy / rel) for rel in files],
        "map_tokens": args.map_tokens, "runs": args.runs, "warmup": 1, "tasks": jobs,
    }
    job_file, out_file = scratch / "job.json", scratch / "out.json"
    job_file.write_text(json.dumps(job), encoding="utf-8")
    bl.check(bl.run_child([str(python), str(DRIVER), str(job_file), str(out_file)], cwd=copy),
             "aider driver")
    driver: dict[str, Any] = json.loads(out_file.read_text(encoding="utf-8"))
    return driver


def indexed_files(tree: Path, index_dir: Path) -> tuple[frozenset[str], list[str]]:
    """The index's names and the source files ctx04 indexes (both tools map these)."""
    settings = Settings()
    repo, _ = open_repo(tree, plugin_manager(), settings, index_dir)
    try:
        files = ripgrep.list_files(
            tree, repo.globs, settings.exclude_globs, settings.search_timeout_s
        )
        return repo.index.names(), files
    finally:
        repo.index.close()


def measure(
    spec: bl.RepoSpec, args: argparse.Namespace, python: Path, scratch: Path
) -> RepoResult:
    tree = bl.materialise(spec, args.cache_dir, args.mirror_dir)
    index_dir = args.cache_dir / "index" / spec.tag
    names, files = indexed_files(tree, index_dir)
    jobs = aider_jobs(spec.tasks, names, files, Settings())

    # ctx04 first, while aider is not running: the two never share the CPUs.
    ctx04_times = []
    for task in spec.tasks:
        ctx04_times.append(
            bl.sample(partial(retrieve, task.text, tree, index_dir=index_dir), args.runs)
        )
        print(f"  {task.id}: ctx04 {bl.seconds(ctx04_times[-1].median)}", file=sys.stderr,
              flush=True)

    driver = run_aider(python, tree, files, jobs, args, scratch)
    results = []
    for task, job_task, ctx04_stats, done in zip(
        spec.tasks, jobs, ctx04_times, driver["tasks"], strict=True
    ):
        results.append(TaskResult(
            task, len(job_task["mentioned_idents"]), len(job_task["mentioned_fnames"]),
            ctx04_stats, driver_stats(done), done["map_tokens"],
        ))
    return RepoResult(spec, len(files), driver["cold_seconds"], results, driver)


def driver_stats(done: dict[str, Any]) -> bl.Stats:
    """One task's wall and CPU samples as the driver reported them."""
    return bl.Stats(tuple(done["samples"]), tuple(done["cpu"]))


def report(result: RepoResult) -> str:
    rows = []
    for t in result.tasks:
        rows.append([
            t.task.id, f"{t.idents} / {t.fnames}", bl.spread(t.ctx04), bl.spread(t.aider),
            bl.ratio(t.ctx04.median, t.aider.median), bl.ratio(t.aider.median, t.ctx04.median),
            bl.seconds(t.ctx04.cpu_median), bl.seconds(t.aider.cpu_median),
            bl.ratio(t.aider.cpu_median, t.ctx04.cpu_median), f"{t.map_tokens:.0f}",
        ])
    for label, combine in (("**median over tasks**", statistics.median),
                           ("**sum over tasks**", sum)):
        ctx04 = combine(t.ctx04.median for t in result.tasks)
        aider = combine(t.aider.median for t in result.tasks)
        ctx04_cpu = combine(t.ctx04.cpu_median for t in result.tasks)
        aider_cpu = combine(t.aider.cpu_median for t in result.tasks)
        rows.append([label, "", bl.seconds(ctx04), bl.seconds(aider), bl.ratio(ctx04, aider),
                     bl.ratio(aider, ctx04), bl.seconds(ctx04_cpu), bl.seconds(aider_cpu),
                     bl.ratio(aider_cpu, ctx04_cpu), ""])
    return bl.markdown_table(
        ["task", "idents / files mentioned", "ctx04 API median (min–max)",
         "aider map median (min–max)", "ctx04 / aider", "speed-up (aider / ctx04)",
         "ctx04 CPU", "aider CPU", "speed-up, CPU", "aider map tokens"], rows,
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    bl.add_common_args(parser)
    add_aider_args(parser)
    args = parser.parse_args(argv)
    specs = bl.chosen_specs(args)
    python = aider_python(args)
    bl.print_header("ctx04 vs aider repository map", ["bench_aider.py", *argv])
    (args.cache_dir / "scratch").mkdir(parents=True, exist_ok=True)
    results = []
    for spec in specs:
        with tempfile.TemporaryDirectory(dir=args.cache_dir / "scratch") as scratch:
            result = measure(spec, args, python, Path(scratch))
        results.append(result)
        versions = ", ".join(f"{k} {v}" for k, v in result.driver["versions"].items())
        print(bl.repo_heading(spec, args.cache_dir / "trees" / spec.tag, result.files))
        print(f"aider: {versions}; Python {result.driver['python']}; tokens counted by "
              f"{result.driver['token_counter']}; map_tokens={args.map_tokens}.  ")
        print(f"aider's first call on an empty tags cache (cold, 1 sample): "
              f"{bl.seconds(result.cold_seconds)}.  ")
        print(f"{args.runs} runs per task after 1 warm-up. Target (django): ctx04 ≥ 10× faster "
              "than aider's map.\n")
        if result.driver["warnings"]:
            print(f"aider warnings: {'; '.join(result.driver['warnings'])}\n")
        print(report(result) + "\n", flush=True)
    if len(results) > 1:
        print("### Growth across repositories (median over tasks of per-task medians)\n")
        rows = []
        for r in results:
            ctx04 = statistics.median(t.ctx04.median for t in r.tasks)
            aider = statistics.median(t.aider.median for t in r.tasks)
            ctx04_cpu = statistics.median(t.ctx04.cpu_median for t in r.tasks)
            aider_cpu = statistics.median(t.aider.cpu_median for t in r.tasks)
            rows.append([r.spec.name, str(r.files), bl.seconds(ctx04), bl.seconds(aider),
                         bl.ratio(aider, ctx04), bl.ratio(aider_cpu, ctx04_cpu),
                         bl.seconds(r.cold_seconds)])
        print(bl.markdown_table(
            ["repo", "files", "ctx04 API", "aider map (warm)", "speed-up (aider / ctx04)",
             "speed-up, CPU", "aider cold first call"], rows,
        ) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
    print(f"At the end: {bl.load_line()}.")
