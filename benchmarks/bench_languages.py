"""Index throughput per language: MB/s of source, cold, one larger repository each.

    .venv/bin/python benchmarks/bench_languages.py [--repo go ...] [--runs 3]

``languages.json`` pins one public repository per parser plugin (python,
c, cpp, go, java, javascript, typescript, php, ruby, rust). Per repository
(pinned tree in the cache folder, see benchlib):

- the language's files are the ones its parser plugin claims (its
  ``source_globs``); the build loads the plugins with every other source
  plugin disabled (``--disable`` for the CLI), so it lists, reads and parses
  exactly those files and nothing else of the tree;
- cold build: ``pipeline.open_repo`` + ``close`` in-process, as ``ctx04
  index`` does, into a new empty index folder each run, after one untimed
  warm-up build; wall and CPU time;
- the floor: listing those files (``ripgrep.list_files``) and reading every
  one the build reads (all but too-large ones), in-process: what any cold
  build has to do before it parses anything;
- the reference: python (django), measured first in the same run, so every
  language's MB/s is also given as a ratio to Python's;
- peak RSS: one more cold build as a ``ctx04 index`` child process (same
  disabled plugins), its ``ru_maxrss`` from wait4: interpreter and imports
  included.

MB are 10^6 bytes of the files the build read, too-large files (over
``max_file_bytes``) excluded; MB/s and files/s are over the median wall time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import benchlib as bl
import pluggy

from ctx04_core import ripgrep
from ctx04_core.index import RefreshStats
from ctx04_core.pipeline import open_repo
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings

LANGUAGES_FILE = bl.BENCH_DIR / "languages.json"
REFERENCE = "python"  # its MB/s is the baseline of the ratio column
NOT_READ = frozenset({"too_large", "unreadable"})  # statuses of files the build never reads
_INDEXED = re.compile(r"indexed (\d+) files")


@dataclass(frozen=True)
class LanguageRepo:
    language: str  # the parser plugin's entry-point name, also the --repo choice
    spec: bl.RepoSpec  # name = the tree's cache folder name; no edit file, no tasks
    commit_of: str  # the task whose base_commit pins the tree


def load_repos() -> dict[str, LanguageRepo]:
    data = json.loads(LANGUAGES_FILE.read_text(encoding="utf-8"))
    return {
        language: LanguageRepo(
            language,
            bl.RepoSpec(repo["name"], repo["slug"], repo["mirror"], repo["commit"], "", ()),
            repo["commit_of"],
        )
        for language, repo in data["repos"].items()
    }


@dataclass(frozen=True)
class Result:
    repo: LanguageRepo
    files: int  # files of the language the build listed
    read_bytes: int  # bytes of the ones it read
    tree_files: int  # source files a full ctx04 build (every plugin) lists in the tree
    labels: tuple[tuple[str, int], ...]  # languages the index recorded, with file counts
    statuses: Counter[str]  # files not parsed in full, by status (partial, syntax_error, ...)
    cold: bl.Stats
    floor: bl.Stats
    rss: int  # bytes, the ctx04 index child's peak

    @property
    def mb(self) -> float:
        return self.read_bytes / 1e6

    def mb_per_s(self, seconds: float) -> float:
        return self.mb / seconds if seconds > 0 else float("nan")


def globs_of(pm: pluggy.PluginManager) -> tuple[str, ...]:
    return tuple(sorted({g for found in pm.hook.source_globs() for g in found or ()}))


def others(every: pluggy.PluginManager, language: str) -> list[str]:
    """The source plugins (parsers, and ``unparsed``'s search-only globs) to disable."""
    return sorted(
        name for name, plugin in every.list_name_plugin()
        if plugin is not None and name != language and hasattr(plugin, "source_globs")
    )


def measure(repo: LanguageRepo, args: argparse.Namespace, scratch: Path) -> Result:
    tree = bl.materialise(repo.spec, args.cache_dir, args.mirror_dir)
    settings = Settings()
    every = plugin_manager()
    disabled = others(every, repo.language)
    pm = plugin_manager(disable=disabled)
    globs = globs_of(pm)
    tree_files = len(
        ripgrep.list_files(tree, globs_of(every), settings.exclude_globs, settings.search_timeout_s)
    )

    builds: list[RefreshStats] = []
    folders = itertools.count()

    def cold_build() -> None:
        # A folder that does not exist yet: nothing to delete inside the timed call.
        opened, stats = open_repo(tree, pm, settings, scratch / f"cold-{next(folders)}")
        opened.index.close()
        builds.append(stats)

    print(f"{repo.language}: cold builds of {repo.spec.slug}", file=sys.stderr, flush=True)
    cold = bl.sample(cold_build, args.runs)
    stats = builds[-1]
    if any((s.files, s.parsed, s.failures) != (stats.files, stats.parsed, stats.failures)
           for s in builds):
        raise SystemExit(f"{repo.language}: the cold builds disagree on what they indexed")
    statuses = Counter(status for _, status, _ in stats.failures)
    unread = {path for path, status, _ in stats.failures if status in NOT_READ}

    listed = ripgrep.list_files(tree, globs, settings.exclude_globs, settings.search_timeout_s)
    read = [tree / rel for rel in listed if rel not in unread]

    def list_and_read() -> int:
        ripgrep.list_files(tree, globs, settings.exclude_globs, settings.search_timeout_s)
        return sum(len(path.read_bytes()) for path in read)

    read_bytes = list_and_read()
    floor = bl.sample(list_and_read, args.runs)

    child = bl.check(bl.run_child([
        bl.tool_path("ctx04"), "index", "--repo", str(tree),
        "--index-dir", str(scratch / "child-index"),
        *(arg for name in disabled for arg in ("--disable", name)),
    ]), "ctx04 index")
    found = _INDEXED.search(child.stdout.decode("utf-8", "replace"))
    if found is None or int(found.group(1)) != stats.files:
        raise SystemExit(f"ctx04 index listed other files than open_repo: {child.stdout[:300]!r}")
    return Result(repo, stats.files, read_bytes, tree_files, stats.languages, statuses,
                  cold, floor, child.max_rss_bytes)


def throughput_table(results: list[Result]) -> str:
    reference = next((r for r in results if r.repo.language == REFERENCE), None)
    rows = []
    for r in results:
        cold = r.cold
        mbs = r.mb_per_s(cold.median)
        rows.append([
            r.repo.language, f"{r.repo.spec.slug} @ `{r.repo.spec.commit[:12]}`",
            f"{r.files:,}", f"{r.mb:.2f}", bl.spread(cold),
            f"{mbs:.2f}", f"{r.mb_per_s(cold.max):.2f}–{r.mb_per_s(cold.min):.2f}",
            f"{r.files / cold.median:,.0f}",
            bl.seconds(cold.cpu_median), f"{r.mb_per_s(cold.cpu_median):.2f}",
            bl.ratio(mbs, reference.mb_per_s(reference.cold.median)) if reference else "n/a",
            bl.seconds(r.floor.median), bl.ratio(cold.median, r.floor.median),
        ])
    return bl.markdown_table(
        ["language", "repository", "files", "MB", "cold build, median (min–max)", "MB/s",
         "MB/s (min–max)", "files/s", "CPU median", "MB/s of CPU", "MB/s vs python",
         "list + read floor", "build / floor"],
        rows,
    )


def files_table(results: list[Result]) -> str:
    rows = []
    for r in results:
        failures = {s: n for s, n in r.statuses.items() if s != "partial"}
        rows.append([
            r.repo.language, r.repo.spec.name, f"{r.files:,}", f"{r.tree_files:,}",
            ", ".join(f"{label} {n:,}" for label, n in r.labels) or "none",
            f"{r.statuses['partial']:,}",
            ", ".join(f"{s} {n}" for s, n in sorted(failures.items())) or "0",
            bl.mib(r.rss),
        ])
    return bl.markdown_table(
        ["language", "tree", "files of the language", "all source files in the tree",
         "parsed as (index label)", "partial (parse errors)", "failures",
         "peak RSS, `ctx04 index` child"],
        rows,
    )


def main(argv: list[str]) -> None:
    repos = load_repos()
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0], conflict_handler="resolve"
    )
    bl.add_common_args(parser)
    parser.add_argument(  # replaces benchlib's --repo: the choices are languages here
        "--repo", action="append", choices=(*repos, "all"),
        help="language to measure (repeatable; default all); python, the reference, "
        "is always measured first unless --no-reference",
    )
    parser.add_argument(
        "--no-reference", action="store_true",
        help="do not add python (django) when it is not asked for: no 'vs python' ratio",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    names = list(repos) if not args.repo or "all" in args.repo else args.repo
    if not args.no_reference:
        names = [REFERENCE, *names]
    chosen = [repos[name] for name in dict.fromkeys(names)]

    bl.print_header("ctx04 index throughput per language", ["bench_languages.py", *argv])
    (args.cache_dir / "scratch").mkdir(parents=True, exist_ok=True)
    results = []
    for repo in chosen:
        scratch = Path(
            tempfile.mkdtemp(prefix=f"languages-{repo.spec.tag}-", dir=args.cache_dir / "scratch")
        )
        try:
            results.append(measure(repo, args, scratch))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print(f"  done; {bl.load_line()}", file=sys.stderr, flush=True)

    print(f"{args.runs} cold builds per repository after 1 warm-up, each into a new empty "
          "index folder, in-process (`open_repo`), with every source plugin but the "
          "language's disabled. MB = 10^6 bytes read; MB/s and files/s over the median "
          "wall time; MB/s (min–max) over the slowest and fastest run.\n")
    print(throughput_table(results) + "\n")
    print(files_table(results) + "\n")
    print("Trees and the tasks that pin them: "
          + "; ".join(f"{r.repo.spec.name} `{r.repo.spec.commit[:12]}` ({r.repo.commit_of})"
                      for r in results) + ".\n", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
    print(f"At the end: {bl.load_line()}.")
