"""Warm retrieval cost against the bare ripgrep floor, and CLI start-up overhead.

    .venv/bin/python benchmarks/bench_query.py --repo django [--runs 5]

Per repository (pinned tree in the cache folder, its index built once in
``CACHE/index/<repo>-<commit>`` and warm), for each of the 10 fixed tasks:

- API: ``ctx04_core.pipeline.retrieve(task, tree, index_dir=...)`` in this
  process (plugin loading, index refresh, query, recall, rank, prune, assemble);
- server: ``retrieve`` through the MCP SDK's client to one ``ctx04 mcp --repo
  TREE --index-dir I`` child over stdio, started once per repository and warm
  (plugins, tokenizer, open index; the watcher's nothing-changed check instead
  of the stat walk); its slice is checked equal to the API's, and its CPU is
  the server process's (with the rg and git it ran);
- CLI: ``ctx04 retrieve --task-file T --repo TREE --index-dir I -o json`` as a
  child process (interpreter start-up and imports included);
- floor: the query's terms (``build_query`` over the index's names, then the
  ripgrep plugin's ``search_terms``) searched with the plugin's own
  ``rg_command`` line, one rg for all terms, run to completion: the bare
  search ctx04 cannot do without;
- per-term: the spec's way (§3.2), one rg per term, one after the other,
  each stopped once more than ``hits_per_term`` (40) hit lines have arrived:
  what lexical recall cost before it searched all terms in one run;
- aider (with ``--aider``): aider's repository map on the same tasks, as
  ``bench_aider.py`` times it (its own venv under the cache folder, made on
  first use; driven by ``aider_driver.py``), after ctx04's figures so the two
  never share the CPUs.

Then, once: ``ctx04 --help`` and ``python -c "import ctx04_core"`` against
``python -c pass`` (the interpreter's own start-up).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import bench_aider
import benchlib as bl
import serverlib
from ctx04_recall_ripgrep import rg_command, search_terms

from ctx04_core.pipeline import open_repo, retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query


@dataclass(frozen=True)
class TaskResult:
    task: bl.Task
    terms: int
    api: bl.Stats
    server: bl.Stats
    cli: bl.Stats
    floor: bl.Stats
    per_term: bl.Stats
    aider: bl.Stats | None = None


@dataclass(frozen=True)
class RepoResult:
    spec: bl.RepoSpec
    files: int
    tasks: list[TaskResult]


def warm_index(spec: bl.RepoSpec, args: argparse.Namespace) -> tuple[Path, Path, int]:
    """The pinned tree and its up-to-date index folder; ctx04 never writes into the tree."""
    tree = bl.materialise(spec, args.cache_dir, args.mirror_dir)
    index_dir = args.cache_dir / "index" / spec.tag
    repo, stats = open_repo(tree, plugin_manager(), Settings(), index_dir)
    repo.index.close()
    return tree, index_dir, stats.files


def query_terms(task: bl.Task, tree: Path, index_dir: Path) -> tuple[list[str], tuple[str, ...]]:
    """The terms the ripgrep plugin searches for this task's query, and the source globs."""
    settings = Settings()
    pm = plugin_manager()
    repo, _ = open_repo(tree, pm, settings, index_dir)
    try:
        query = build_query(task.text, names=repo.index.names(), settings=settings)
        return search_terms(query), repo.globs
    finally:
        repo.index.close()


def run_floor(command: list[str], tree: Path) -> None:
    subprocess.run(command, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                   check=False)


def run_per_term(commands: list[list[str]], tree: Path, cap: int) -> None:
    """Each rg killed once it printed more than ``cap`` lines, as the plugin does."""
    for cmd in commands:
        proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        lines = 0
        while chunk := os.read(proc.stdout.fileno(), 1 << 16):
            lines += chunk.count(b"\n")
            if lines > cap:
                proc.kill()
                break
        proc.stdout.close()
        proc.wait()


def measure(
    spec: bl.RepoSpec, args: argparse.Namespace, scratch: Path, aider: Path | None
) -> RepoResult:
    tree, index_dir, files = warm_index(spec, args)
    ctx04 = bl.tool_path("ctx04")
    cap = Settings().hits_per_term
    results = []
    with serverlib.running([tree], index_dir) as server:
        for task in spec.tasks:
            results.append(measure_task(task, tree, index_dir, server, ctx04, cap, args, scratch))
    if aider is not None:
        names, listed = bench_aider.indexed_files(tree, index_dir)
        jobs = bench_aider.aider_jobs(spec.tasks, names, listed, Settings())
        driver = bench_aider.run_aider(aider, tree, listed, jobs, args, scratch)
        results = [replace(t, aider=bench_aider.driver_stats(done))
                   for t, done in zip(results, driver["tasks"], strict=True)]
    return RepoResult(spec, files, results)


def measure_task(
    task: bl.Task, tree: Path, index_dir: Path, server: serverlib.Server, ctx04: str, cap: int,
    args: argparse.Namespace, scratch: Path,
) -> TaskResult:
    terms, globs = query_terms(task, tree, index_dir)
    settings = Settings()
    api = bl.sample(partial(retrieve, task.text, tree, index_dir=index_dir), args.runs)
    if server.retrieve(task.text) != retrieve(task.text, tree, index_dir=index_dir).context.text:
        raise SystemExit(f"{task.id}: the server's slice differs from the API's")
    served = serverlib.sample(server, task.text, args.runs)
    task_file = scratch / f"{task.id}.txt"
    task_file.write_text(task.text, encoding="utf-8")
    cli, _ = bl.sample_child(
        [ctx04, "retrieve", "--task-file", str(task_file), "--repo", str(tree),
         "--index-dir", str(index_dir), "-o", "json"],
        args.runs, what=f"ctx04 retrieve ({task.id})",
    )
    floor = bl.sample(
        partial(run_floor, rg_command(terms, globs, settings), tree), args.runs
    )
    per_term_commands = [rg_command([term], globs, settings) for term in terms]
    per_term = bl.sample(partial(run_per_term, per_term_commands, tree, cap), args.runs)
    print(f"  {task.id}: API {bl.seconds(api.median)}, server {bl.seconds(served.median)}, "
          f"CLI {bl.seconds(cli.median)}, floor {bl.seconds(floor.median)}, "
          f"per-term {bl.seconds(per_term.median)} ({len(terms)} terms)",
          file=sys.stderr, flush=True)
    return TaskResult(task, len(terms), api, served, cli, floor, per_term)


_KINDS = ("api", "server", "cli", "floor", "per_term")


def medians(result: RepoResult, cpu: bool = False) -> dict[str, float]:
    """Per kind, the median over tasks of the per-task medians (wall, or CPU)."""
    return {k: statistics.median(_median(getattr(t, k), cpu) for t in result.tasks)
            for k in _KINDS}


def sums(result: RepoResult, cpu: bool = False) -> dict[str, float]:
    """Per kind, the sum over tasks of the per-task medians (wall, or CPU)."""
    return {k: sum(_median(getattr(t, k), cpu) for t in result.tasks) for k in _KINDS}


def _median(stats: bl.Stats, cpu: bool) -> float:
    return stats.cpu_median if cpu else stats.median


def report(result: RepoResult) -> str:
    def ratios(wall: dict[str, float], cpu: dict[str, float]) -> list[str]:
        return [bl.ratio(wall["api"], wall["floor"]), bl.ratio(wall["server"], wall["floor"]),
                bl.ratio(wall["cli"], wall["floor"]),
                bl.ratio(wall["api"], wall["per_term"]), bl.seconds(cpu["api"]),
                bl.seconds(cpu["server"]), bl.seconds(cpu["floor"]),
                bl.ratio(cpu["api"], cpu["floor"]), bl.ratio(cpu["server"], cpu["floor"])]

    rows = []
    for t in result.tasks:
        wall = {k: getattr(t, k).median for k in _KINDS}
        cpu = {k: getattr(t, k).cpu_median for k in _KINDS}
        rows.append([t.task.id, str(t.terms), *(bl.spread(getattr(t, k)) for k in _KINDS),
                     *ratios(wall, cpu)])
    for label, wall, cpu, terms in (
        ("**median over tasks**", medians(result), medians(result, cpu=True),
         statistics.median(t.terms for t in result.tasks)),
        ("**sum over tasks**", sums(result), sums(result, cpu=True),
         sum(t.terms for t in result.tasks)),
    ):
        rows.append([label, f"{terms:g}", *(bl.seconds(wall[k]) for k in _KINDS),
                     *ratios(wall, cpu)])
    return bl.markdown_table(
        ["task", "rg terms", "API median (min–max)", "server (MCP) median (min–max)",
         "CLI median (min–max)", "rg floor (one run, all terms)",
         "rg per term, capped at 41 hits (spec)", "API / floor", "server / floor",
         "CLI / floor", "API / per-term", "API CPU", "server CPU", "floor CPU",
         "API / floor, CPU", "server / floor, CPU"], rows,
    )


def aider_report(result: RepoResult) -> str:
    """The server, the API and the floor against aider's map, wall time, same run."""
    def row(label: str, server: float, api: float, floor: float, aider: float) -> list[str]:
        return [label, bl.seconds(server), bl.seconds(api), bl.seconds(floor), bl.seconds(aider),
                bl.ratio(aider, server), bl.ratio(aider, api), bl.ratio(server, floor)]

    rows = []
    for t in result.tasks:
        assert t.aider is not None
        rows.append(row(t.task.id, t.server.median, t.api.median, t.floor.median,
                        t.aider.median))
    for label, combine in (("**median over tasks**", statistics.median),
                           ("**sum over tasks**", sum)):
        rows.append(row(label, *(combine(_median(getattr(t, k), False) for t in result.tasks)
                                 for k in ("server", "api", "floor", "aider"))))
    return bl.markdown_table(
        ["task", "server (MCP)", "API", "rg floor", "aider map", "speed-up (aider / server)",
         "speed-up (aider / API)", "server / floor"], rows,
    )


def startup(runs: int) -> str:
    python, ctx04 = sys.executable, bl.tool_path("ctx04")
    commands = [
        ("`python -c pass` (baseline)", [python, "-c", "pass"]),
        ('`python -c "import ctx04_core"`', [python, "-c", "import ctx04_core"]),
        ('`python -c "import ctx04_core.pipeline"`', [python, "-c", "import ctx04_core.pipeline"]),
        ("`ctx04 --help`", [ctx04, "--help"]),
    ]
    measured = [(label, bl.sample_child(cmd, runs)[0]) for label, cmd in commands]
    base, base_cpu = measured[0][1].median, measured[0][1].cpu_median
    rows = [[label, bl.seconds(s.median), bl.seconds(s.min), bl.seconds(s.max),
             bl.ratio(s.median, base), bl.seconds(s.median - base), bl.seconds(s.cpu_median),
             bl.seconds(s.cpu_median - base_cpu)] for label, s in measured]
    return bl.markdown_table(
        ["command", "median", "min", "max", "ratio to `python -c pass`",
         "overhead (median − baseline)", "CPU median", "CPU overhead"], rows,
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    bl.add_common_args(parser)
    parser.add_argument(
        "--startup-runs", type=int, default=20,
        help="runs of each start-up command (they take tens of ms; default 20)",
    )
    parser.add_argument(
        "--aider", action="store_true",
        help="also time aider's repository map on the same tasks (installs it on first use)",
    )
    bench_aider.add_aider_args(parser)
    args = parser.parse_args(argv)
    specs = bl.chosen_specs(args)
    aider = bench_aider.aider_python(args) if args.aider else None
    bl.print_header("ctx04 query benchmark", ["bench_query.py", *argv])
    (args.cache_dir / "scratch").mkdir(parents=True, exist_ok=True)
    results = []
    for spec in specs:
        with tempfile.TemporaryDirectory(dir=args.cache_dir / "scratch") as scratch:
            result = measure(spec, args, Path(scratch), aider)
        results.append(result)
        print(bl.repo_heading(spec, args.cache_dir / "trees" / spec.tag, result.files))
        print(f"Warm index; {args.runs} runs per task after 1 warm-up. "
              "Target (django): API and server ≤ 3× the floor.\n")
        print(report(result) + "\n", flush=True)
        if aider is not None:
            print("Against aider's repository map, measured after ctx04 in the same run "
                  f"(map_tokens={args.map_tokens}; median of {args.runs} runs after 1 warm-up). "
                  "Target (django): ≥ 10× faster than aider.\n")
            print(aider_report(result) + "\n", flush=True)
    if len(results) > 1:
        print("### Growth across repositories (median over the 10 tasks of per-task medians)\n")
        rows = []
        for r in results:
            v, c = medians(r), medians(r, cpu=True)
            rows.append([r.spec.name, str(r.files), *(bl.seconds(v[k]) for k in _KINDS),
                         bl.ratio(v["api"], v["floor"]), bl.ratio(v["server"], v["floor"]),
                         bl.ratio(v["api"], v["per_term"]),
                         bl.seconds(c["api"]), bl.ratio(c["api"], c["floor"])])
        print(bl.markdown_table(
            ["repo", "files", "API", "server", "CLI", "rg floor", "rg per term, capped",
             "API / floor", "server / floor", "API / per-term", "API CPU",
             "API / floor, CPU"],
            rows,
        ))
        print()
    print(f"### CLI start-up ({args.startup_runs} runs after 1 warm-up)\n")
    print("Target: overhead ≤ 150 ms.\n")
    print(startup(args.startup_runs) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
    print(f"At the end: {bl.load_line()}.")
