"""Scale: cold build, nothing-changed refresh, warm retrieve, peak RSS and index size
on generated repositories of 5,000 to 50,000 Python files and on apache/druid.

    CTX04_DISABLE=pin,meaning .venv/bin/python benchmarks/bench_scale.py [--size 50000] [--runs 3]

Per repository:

- the generated ones (``scalegen.py``, fixed seed) are written and committed
  once under ``CACHE/scale/trees/gen-<files>-seed<seed>``; druid is the
  pinned commit of a mirror extracted once under ``CACHE/trees`` (benchlib);
- cold build: ``ctx04 index --repo TREE --index-dir EMPTY`` as a child
  process, wall time and the child's peak RSS; the index it leaves (kept in
  ``CACHE/scale/indexes/<tree>``) is the warm one below, and its file size is
  reported; with ``--cold-runs 0`` the kept index is used as it is (a
  50,000-file build takes minutes);
- nothing-changed refresh: ``CodeIndex.open`` + ``refresh`` + ``close`` in
  this process;
- warm retrieve (API): ``ctx04_core.pipeline.retrieve(task, tree,
  index_dir=...)`` in this process, per pinned task (each names identifiers
  of the repository's code), median over the tasks of per-task medians;
  the refresh's share is what the retrieval itself reports;
- the floor, measured in the same process: one ``rg`` run over all of the
  task's query terms with the ripgrep plugin's own command line;
- peak RSS of a warm retrieve: one ``ctx04 retrieve -o json`` child process
  per task on the warm index (interpreter and imports included).

A last table gives how each figure grows with the file count, against the
square root of the file count (the target for query time).
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import benchlib as bl
import scalegen
from ctx04_recall_ripgrep import rg_command, search_terms

from ctx04_core import ripgrep
from ctx04_core.index import CodeIndex
from ctx04_core.pipeline import open_repo, retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query

SEED = 7
SIZES = (5_000, 20_000, 50_000)
# The tasks' files lie in the first 5,000, so every size answers the same tasks.
TASK_FILES = (137, 1_211, 2_503, 3_777, 4_900)
# apache/druid, from a fork whose history holds upstream's commits (the
# upstream snapshot is larger than a fetch may bring); its newest commit then.
DRUID = bl.RepoSpec(
    "druid", "apache/druid", "gargvishesh+druid", "4de1909d79bddfa751b32529989cab637ae62591",
    "", (
        bl.Task("druid-1", "hand-written",
                "GroupByQueryEngine returns duplicate rows when a limit spec is pushed down\n\n"
                "With forceLimitPushDown the grouper of GroupByQueryEngine returns the same "
                "row twice after spilling to disk; LimitedBufferHashGrouper.iterator seems "
                "to re-read a bucket it already returned."),
        bl.Task("druid-2", "hand-written",
                "Coordinator keeps loading a segment that was dropped\n\n"
                "After a drop rule matches, SegmentLoadQueueManager still queues the "
                "segment for loading on the historical; LoadQueuePeon.dropSegment is never "
                "called and the coordinator logs 'Segment already loaded'."),
        bl.Task("druid-3", "hand-written",
                "JSON_VALUE with RETURNING BOOLEAN is planned as a string column\n\n"
                "SELECT JSON_VALUE(obj, '$.flag' RETURNING BOOLEAN) FROM t gives 'true' "
                "instead of 1: NestedDataOperatorConversions does not map BOOLEAN to "
                "a long output type in the SQL planner."),
    ),
)
# The targets for the 50,000-file repository.
# The cold-build cells of a run with --cold-runs 0.
NOT_BUILT = "not run (kept index)"
TARGETS = {"cold": "≤ 120 s", "refresh": "≤ 0.3 s", "api": "≤ 1.5 s", "rss": "≤ 500 MB"}


@dataclass(frozen=True)
class ScaleResult:
    name: str
    tree: Path
    tasks: tuple[str, ...]  # task ids, in the order of the per-task figures
    files: int
    nodes: int
    cold: bl.Stats | None  # None with --cold-runs 0
    cold_rss: int  # bytes, median over the cold builds (0 without one)
    index_bytes: int
    refresh: bl.Stats
    api: tuple[bl.Stats, ...]  # per task
    api_refresh: tuple[float, ...]  # per task: the median refresh seconds inside the API call
    floor: tuple[bl.Stats, ...]  # per task
    retrieve_rss: tuple[int, ...]  # per task, bytes

    def api_median(self) -> float:
        return statistics.median(s.median for s in self.api)

    def api_cpu_median(self) -> float:
        return statistics.median(s.cpu_median for s in self.api)

    def floor_median(self) -> float:
        return statistics.median(s.median for s in self.floor)


def measure(name: str, tree: Path, tasks: tuple[bl.Task, ...], args: argparse.Namespace,
            index_dir: Path, scratch: Path) -> ScaleResult:
    pm = plugin_manager()
    settings = Settings()
    globs = tuple(sorted({g for found in pm.hook.source_globs() for g in found or ()}))
    files = len(ripgrep.list_files(tree, globs, settings.exclude_globs, settings.search_timeout_s))
    ctx04 = bl.tool_path("ctx04")
    if not args.cold_runs and not (index_dir / "index.sqlite3").exists():
        raise SystemExit(f"--cold-runs 0: no kept index in {index_dir}; run with a cold build")
    cold_runs = []
    for run in range(args.cold_runs):
        shutil.rmtree(index_dir, ignore_errors=True)
        done = bl.check(
            bl.run_child([ctx04, "index", "--repo", str(tree), "--index-dir", str(index_dir)]),
            "ctx04 index",
        )
        cold_runs.append(done)
        print(f"  {name}: cold build {run + 1}/{args.cold_runs}: {bl.seconds(done.seconds)}, "
              f"{bl.mib(done.max_rss_bytes)}", file=sys.stderr, flush=True)
    cold = bl.Stats(
        tuple(r.seconds for r in cold_runs), tuple(r.cpu_seconds for r in cold_runs)
    ) if cold_runs else None
    index_bytes = sum(p.stat().st_size for p in index_dir.glob("index.sqlite3*"))

    def nothing_changed() -> None:
        index = CodeIndex.open(tree, index_dir)
        try:
            stats = index.refresh(pm, globs, settings)
        finally:
            index.close()
        assert stats.parsed == 0, stats

    refresh = bl.sample(nothing_changed, args.runs)
    print(f"  {name}: nothing-changed refresh {bl.seconds(refresh.median)}",
          file=sys.stderr, flush=True)
    repo, stats = open_repo(tree, pm, settings, index_dir)
    names = repo.index.names()
    repo.index.close()
    api, api_refresh, floor, rss = [], [], [], []
    for task in tasks:
        inner: list[float] = []

        def warm(text: str = task.text, seconds: list[float] = inner) -> None:
            seconds.append(retrieve(text, tree, index_dir=index_dir).index.seconds)

        api.append(bl.sample(warm, args.runs))
        api_refresh.append(statistics.median(inner))
        terms = search_terms(build_query(task.text, names=names, settings=settings))
        command = rg_command(terms, globs, settings)
        floor.append(bl.sample(partial(subprocess.run, command, cwd=tree,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       check=False), args.runs))
        task_file = scratch / f"{task.id}.txt"
        task_file.write_text(task.text, encoding="utf-8")
        child = bl.check(bl.run_child(
            [ctx04, "retrieve", "--task-file", str(task_file), "--repo", str(tree),
             "--index-dir", str(index_dir), "-o", "json"]), f"ctx04 retrieve ({task.id})")
        rss.append(child.max_rss_bytes)
        print(f"  {name} {task.id}: API {bl.spread(api[-1])} (refresh "
              f"{bl.seconds(api_refresh[-1])}), floor {bl.seconds(floor[-1].median)}, "
              f"retrieve RSS {bl.mib(child.max_rss_bytes)}", file=sys.stderr, flush=True)
    cold_rss = int(statistics.median(r.max_rss_bytes for r in cold_runs)) if cold_runs else 0
    return ScaleResult(
        name, tree, tuple(t.id for t in tasks), files, stats.nodes, cold, cold_rss, index_bytes,
        refresh, tuple(api), tuple(api_refresh), tuple(floor), tuple(rss),
    )


def report(result: ScaleResult, targets: dict[str, str]) -> str:
    rows = []
    for task, api, inner, floor, rss in zip(
        result.tasks, result.api, result.api_refresh, result.floor, result.retrieve_rss,
        strict=True,
    ):
        rows.append([task, bl.spread(api), bl.seconds(inner), bl.seconds(floor.median),
                     bl.ratio(api.median, floor.median), bl.seconds(api.cpu_median),
                     bl.mib(rss)])
    rows.append(["**median over tasks**", bl.seconds(result.api_median()),
                 bl.seconds(statistics.median(result.api_refresh)),
                 bl.seconds(result.floor_median()),
                 bl.ratio(result.api_median(), result.floor_median()),
                 bl.seconds(statistics.median(s.cpu_median for s in result.api)),
                 bl.mib(statistics.median(result.retrieve_rss))])
    tasks = bl.markdown_table(
        ["task", "warm retrieve, API, median (min–max)", "its refresh", "rg floor (all terms)",
         "API / floor", "API CPU", "peak RSS, `ctx04 retrieve` process"], rows)
    api_cpu = result.api_cpu_median()
    summary = bl.markdown_table(["measure", "median (min–max)", "CPU median", "target"], [
        ["cold build, `ctx04 index` wall time",
         bl.spread(result.cold) if result.cold else NOT_BUILT,
         bl.seconds(result.cold.cpu_median) if result.cold else "", targets.get("cold", "")],
        ["cold build, peak RSS (largest process)",
         bl.mib(result.cold_rss) if result.cold else NOT_BUILT, "", targets.get("rss", "")],
        ["index file (with its WAL)", bl.mib(result.index_bytes), "", ""],
        ["nothing-changed refresh (open + refresh + close)", bl.spread(result.refresh),
         bl.seconds(result.refresh.cpu_median), targets.get("refresh", "")],
        ["warm retrieve, API (median over tasks)", bl.seconds(result.api_median()),
         bl.seconds(api_cpu), targets.get("api", "")],
        ["peak RSS of a warm `ctx04 retrieve`", bl.mib(statistics.median(result.retrieve_rss)),
         "", targets.get("rss", "")],
    ])
    return summary + "\n\n" + tasks


def growth(results: list[ScaleResult]) -> str:
    """Each figure against the smallest generated repository's, beside √(files ratio)."""
    base = results[0]
    rows = []
    for r in results:
        root = math.sqrt(r.files / base.files)
        cold = (bl.seconds(r.cold.median), bl.seconds(r.cold.cpu_median), bl.mib(r.cold_rss)) \
            if r.cold else (NOT_BUILT, "", "")
        rows.append([r.name, f"{r.files:,}", f"{r.nodes:,}", *cold, bl.mib(r.index_bytes),
                     bl.seconds(r.refresh.median), bl.seconds(r.api_median()),
                     bl.seconds(r.api_cpu_median()), bl.seconds(r.floor_median()),
                     bl.ratio(r.api_median(), r.floor_median()),
                     bl.ratio(r.api_median(), base.api_median()),
                     bl.ratio(r.api_cpu_median(), base.api_cpu_median()), f"{root:.2f}×"])
    return bl.markdown_table(
        ["repository", "files", "nodes", "cold build", "its CPU", "cold RSS", "index",
         "refresh", "warm retrieve (API)", "its CPU", "rg floor", "API / floor",
         "API growth", "API CPU growth", "√ files growth"],
        rows)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, action="append",
                        help=f"generated repository size in files (repeatable; default "
                        f"{', '.join(map(str, SIZES))}); 0 for none")
    parser.add_argument("--druid", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure apache/druid (default yes)")
    parser.add_argument("--runs", type=int, default=3,
                        help="timed runs per refresh and per task, after one warm-up (default 3)")
    parser.add_argument("--cold-runs", type=int, default=1,
                        help="cold builds per repository (default 1; each takes minutes); "
                        "0 measures the index a former run kept, brought up to date")
    parser.add_argument("--cache-dir", type=Path, default=bl.default_cache_dir(),
                        help="where generated and pinned trees and the indexes go "
                        "(default $XDG_CACHE_HOME/ctx04-bench or ~/.cache/ctx04-bench)")
    parser.add_argument("--mirror-dir", type=Path, default=bl.DEFAULT_MIRROR_DIR,
                        help="folder of bare git mirrors laid out as <owner>+<name>/repo "
                        "(druid's is gargvishesh+druid; default /work/.mirror)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.cold_runs < 0:
        raise SystemExit("--runs must be at least 1, --cold-runs at least 0")
    sizes = sorted({s for s in (args.size or SIZES) if s})
    if any(s < max(TASK_FILES) + 1 for s in sizes):
        raise SystemExit(f"--size must be at least {max(TASK_FILES) + 1} (the tasks' files)")
    bl.print_header("ctx04 scale benchmark", ["bench_scale.py", *argv])
    (args.cache_dir / "scratch").mkdir(parents=True, exist_ok=True)
    results = []
    repos: list[tuple[str, Path, tuple[bl.Task, ...], dict[str, str]]] = []
    for size in sizes:
        tree = scalegen.materialise(SEED, size, args.cache_dir / "scale" / "trees")
        tasks = tuple(bl.Task(f"gen-{i}", "generated", scalegen.task_text(SEED, i))
                      for i in TASK_FILES)
        repos.append((f"generated {size:,}", tree, tasks, TARGETS if size == 50_000 else {}))
    if args.druid:
        tree = bl.materialise(DRUID, args.cache_dir, args.mirror_dir)
        repos.append(("apache/druid", tree, DRUID.tasks, {}))
    for name, tree, tasks, targets in repos:
        with tempfile.TemporaryDirectory(prefix="scale-", dir=args.cache_dir / "scratch") as s:
            kept = args.cache_dir / "scale" / "indexes" / tree.name
            result = measure(name, tree, tasks, args, kept, Path(s))
        results.append(result)
        print(f"### {name} ({result.files:,} source files, {result.nodes:,} nodes; "
              f"tree {tree})\n")
        print(f"{args.runs} runs per figure after 1 warm-up; {args.cold_runs} cold build(s); "
              f"{bl.load_line()}.\n")
        print(report(result, targets) + "\n", flush=True)
    generated = [r for r in results if r.name.startswith("generated")]
    if len(generated) > 1 or (generated and len(results) > 1):
        print("### Growth with the file count (medians; growth against the smallest)\n")
        print(growth(generated + [r for r in results if r not in generated]) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
    print(f"At the end: {bl.load_line()}.")
