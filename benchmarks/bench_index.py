"""Index cost: cold build and its peak RSS, refresh after nothing / one file changed.

    .venv/bin/python benchmarks/bench_index.py --repo django [--runs 5]

Per repository (pinned tree in the cache folder, see benchlib):

- cold build: ``ctx04 index --repo TREE --index-dir EMPTY`` as a child process,
  a new empty index folder each run; wall time and the child's peak RSS
  (ru_maxrss from wait4), plus the refresh seconds ctx04 itself reports;
- refresh after nothing changed and after one file changed, in-process
  (``CodeIndex.open`` + ``refresh`` + ``close``) on a copy of the tree, the
  change being a comment appended to ``edit_file`` before each timed run;
- the floor: a bare ``rg --files`` over the same tree (walking the repo), as a
  child process; every time is also given as a ratio to it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import benchlib as bl
import pluggy

from ctx04_core import ripgrep
from ctx04_core.index import CodeIndex, RefreshStats
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings

_REPORTED = re.compile(r"indexed (\d+) files in ([\d.]+) s")


@dataclass(frozen=True)
class IndexResult:
    spec: bl.RepoSpec
    files: int
    nodes: int
    edges: int
    floor: bl.Stats
    cold: bl.Stats
    cold_reported: bl.Stats
    rss: tuple[int, ...]
    unchanged: bl.Stats
    one_file: bl.Stats


def measure(spec: bl.RepoSpec, args: argparse.Namespace, scratch: Path) -> IndexResult:
    tree = bl.materialise(spec, args.cache_dir, args.mirror_dir)
    pm = plugin_manager()
    globs = tuple(sorted({g for found in pm.hook.source_globs() for g in found or ()}))
    settings = Settings()
    files = len(ripgrep.list_files(tree, globs, settings.exclude_globs, settings.search_timeout_s))
    rg, ctx04 = bl.tool_path("rg"), bl.tool_path("ctx04")

    floor, _ = bl.sample_child([rg, "--files"], args.runs, cwd=tree)

    cold_dir = scratch / "cold-index"
    cold_runs: list[bl.ChildRun] = []
    for run in range(args.runs + 1):  # the first one is the warm-up
        shutil.rmtree(cold_dir, ignore_errors=True)
        done = bl.check(
            bl.run_child([ctx04, "index", "--repo", str(tree), "--index-dir", str(cold_dir)]),
            "ctx04 index",
        )
        if run:
            cold_runs.append(done)
        label = f"{run}/{args.runs}" if run else "warm-up"
        print(f"  {spec.name}: cold build {label}: {bl.seconds(done.seconds)}",
              file=sys.stderr, flush=True)
    reported = []
    for done in cold_runs:
        found = _REPORTED.search(done.stdout.decode("utf-8", "replace"))
        if found is None:
            raise SystemExit(f"ctx04 index printed no summary: {done.stdout[:300]!r}")
        reported.append(float(found.group(2)))

    # The edits go to a copy: the cached tree stays the pinned commit exactly.
    copy = bl.fresh_copy(tree, scratch / "tree-copy")
    warm_dir = scratch / "warm-index"
    last = _refresh(copy, warm_dir, pm, globs, settings)  # the build the refreshes start from

    def nothing_changed() -> None:
        stats = _refresh(copy, warm_dir, pm, globs, settings)
        assert stats.parsed == 0, stats

    unchanged = bl.sample(nothing_changed, args.runs)
    print(f"  {spec.name}: nothing-changed refresh: {bl.seconds(unchanged.median)}",
          file=sys.stderr, flush=True)

    edited = copy / spec.edit_file
    one_file_times, one_file_cpu = [], []
    for run in range(args.runs + 1):  # the first one is the warm-up
        # The edit is not timed: only what the refresh that follows costs.
        with edited.open("a", encoding="utf-8") as handle:
            handle.write(f"# ctx04 benchmark edit {run}\n")
        cpu_started, started = bl.cpu_now(), time.perf_counter()
        stats = _refresh(copy, warm_dir, pm, globs, settings)
        elapsed, cpu = time.perf_counter() - started, bl.cpu_now() - cpu_started
        assert stats.parsed == 1, stats
        if run:
            one_file_times.append(elapsed)
            one_file_cpu.append(cpu)
    one_file = bl.Stats(tuple(one_file_times), tuple(one_file_cpu))
    print(f"  {spec.name}: one-file refresh: {bl.seconds(one_file.median)}",
          file=sys.stderr, flush=True)
    return IndexResult(
        spec, files, last.nodes, last.edges, floor,
        bl.Stats(tuple(r.seconds for r in cold_runs), tuple(r.cpu_seconds for r in cold_runs)),
        bl.Stats(tuple(reported)), tuple(r.max_rss_bytes for r in cold_runs), unchanged, one_file,
    )


def _refresh(
    root: Path, index_dir: Path, pm: pluggy.PluginManager, globs: tuple[str, ...],
    settings: Settings,
) -> RefreshStats:
    index = CodeIndex.open(root, index_dir)
    try:
        return index.refresh(pm, globs, settings)
    finally:
        index.close()


def _targets(name: str) -> dict[str, str]:
    """The issue's targets that apply to this repository."""
    targets = {"unchanged": "≤ 0.5 s", "one_file": "≤ 200 ms"}
    if name == "django":
        targets["cold"] = "≤ 20 s"
    if name == "sympy":
        targets["rss"] = "≤ 500 MB"
    return targets


def report(result: IndexResult) -> str:
    floor = result.floor.median
    targets = _targets(result.spec.name)

    def row(label: str, stats: bl.Stats, key: str = "") -> list[str]:
        cpu = bl.seconds(stats.cpu_median) if stats.cpu else ""
        return [label, bl.seconds(stats.median), bl.seconds(stats.min), bl.seconds(stats.max),
                bl.ratio(stats.median, floor), cpu, targets.get(key, "")]

    rss = bl.Stats(tuple(float(b) for b in result.rss))
    rows = [
        row("`rg --files` (floor: walking the tree)", result.floor),
        row("cold build, `ctx04 index` process wall time", result.cold, "cold"),
        row("cold build, refresh() as ctx04 reports it", result.cold_reported),
        ["cold build, peak RSS of the process", bl.mib(rss.median), bl.mib(rss.min),
         bl.mib(rss.max), "", "", targets.get("rss", "")],
        row("refresh, nothing changed (open+refresh+close)", result.unchanged, "unchanged"),
        row(f"refresh, one file changed (`{result.spec.edit_file}`)", result.one_file, "one_file"),
    ]
    return bl.markdown_table(
        ["measure", "median", "min", "max", "ratio to floor", "CPU median", "target"], rows
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    bl.add_common_args(parser)
    args = parser.parse_args(argv)
    specs = bl.chosen_specs(args)
    bl.print_header("ctx04 index benchmark", ["bench_index.py", *argv])
    results = []
    (args.cache_dir / "scratch").mkdir(parents=True, exist_ok=True)
    for spec in specs:
        scratch = Path(
            tempfile.mkdtemp(prefix=f"index-{spec.tag}-", dir=args.cache_dir / "scratch")
        )
        try:
            result = measure(spec, args, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        results.append(result)
        tree = args.cache_dir / "trees" / spec.tag
        print(bl.repo_heading(spec, tree, result.files))
        print(f"{args.runs} runs after 1 warm-up; {result.nodes} nodes, {result.edges} edges.\n")
        print(report(result) + "\n", flush=True)
    if len(results) > 1:
        print("### Growth across repositories (medians)\n")
        rows = [[r.spec.name, str(r.files), bl.seconds(r.floor.median), bl.seconds(r.cold.median),
                 bl.mib(statistics.median(r.rss)), bl.seconds(r.unchanged.median),
                 bl.seconds(r.one_file.median)] for r in results]
        print(bl.markdown_table(
            ["repo", "files", "`rg --files`", "cold build", "peak RSS", "nothing changed",
             "one file changed"], rows,
        ) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
    print(f"At the end: {bl.load_line()}.")
