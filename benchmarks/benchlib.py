"""Shared helpers of the benchmark scripts: the task set, materialising pinned
trees into a cache folder, timing, child processes and Markdown tables.

Nothing here is imported by ctx04 itself; the scripts run with the Python that
has ctx04 installed (``.venv/bin/python benchmarks/bench_*.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
TASKS_FILE = BENCH_DIR / "tasks.json"
DEFAULT_MIRROR_DIR = Path("/work/.mirror")
REPO_NAMES = ("requests", "flask", "django", "sympy")


@dataclass(frozen=True)
class Task:
    id: str
    source: str  # "shared/bench/dev.jsonl" or "hand-written"
    text: str


@dataclass(frozen=True)
class RepoSpec:
    name: str  # short name used on the command line: requests, flask, django, sympy
    slug: str  # GitHub owner/name of the upstream project
    mirror: str  # <owner>+<name> folder under --mirror-dir (django comes from a fork)
    commit: str  # the pinned commit: the base_commit of the newest dev task of the repo
    edit_file: str  # the file bench_index.py appends a comment to (one-file refresh)
    tasks: tuple[Task, ...]

    @property
    def tag(self) -> str:
        """Folder name of this repo's pinned tree in the cache."""
        return f"{self.name}-{self.commit[:12]}"


def load_specs() -> dict[str, RepoSpec]:
    data = json.loads(TASKS_FILE.read_text(encoding="utf-8"))
    specs = {}
    for name, repo in data["repos"].items():
        tasks = tuple(Task(t["id"], t["source"], t["text"]) for t in repo["tasks"])
        specs[name] = RepoSpec(
            name, repo["slug"], repo["mirror"], repo["commit"], repo["edit_file"], tasks
        )
    return specs


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctx04-bench"


def add_common_args(parser: argparse.ArgumentParser, default_repos: str = "requests") -> None:
    parser.add_argument(
        "--repo", action="append", choices=(*REPO_NAMES, "all"),
        help=f"repository to measure (repeatable; 'all' = {', '.join(REPO_NAMES)}); "
        f"default {default_repos}",
    )
    parser.add_argument(
        "--runs", type=int, default=5,
        help="timed runs per measurement, after one untimed warm-up (default 5)",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=default_cache_dir(),
        help="where pinned trees, copies, indexes and the aider venv go "
        "(default $XDG_CACHE_HOME/ctx04-bench or ~/.cache/ctx04-bench)",
    )
    parser.add_argument(
        "--mirror-dir", type=Path, default=DEFAULT_MIRROR_DIR,
        help="folder of bare git mirrors laid out as <owner>+<name>/repo (default /work/.mirror)",
    )
    parser.set_defaults(default_repos=default_repos)


def chosen_specs(args: argparse.Namespace) -> list[RepoSpec]:
    specs = load_specs()
    names = args.repo or [args.default_repos]
    if "all" in names:
        names = list(REPO_NAMES)
    if args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    return [specs[name] for name in dict.fromkeys(names)]


# ---------------------------------------------------------------- materialising


def git_dir(spec: RepoSpec, mirror_dir: Path) -> Path:
    found = mirror_dir / spec.mirror / "repo"
    if not found.is_dir():
        # django's pinned commit is fetched from a fork that holds the same commits.
        source = spec.mirror.replace("+", "/")
        raise SystemExit(
            f"no git mirror of {spec.slug} at {found}: put a bare clone of the GitHub "
            f"repository {source} (full history) there, or pass --mirror-dir"
        )
    return found


def materialise(spec: RepoSpec, cache_dir: Path, mirror_dir: Path) -> Path:
    """The pinned commit's files under ``cache_dir/trees``, extracted once.

    Extraction goes to a temporary folder renamed into place at the end, so an
    interrupted run never leaves a half tree that later runs would trust.
    """
    dest = cache_dir / "trees" / spec.tag
    if dest.is_dir():
        return dest
    gdir = git_dir(spec, mirror_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.tag}-", dir=dest.parent))
    print(f"materialising {spec.slug}@{spec.commit[:12]} into {dest}", file=sys.stderr)
    try:
        if not _archive(gdir, spec.commit, staging):
            # A mirror may lack a few large blobs, which makes `git archive` fail;
            # write what is there and name what is missing.
            shutil.rmtree(staging)
            staging.mkdir()
            missing = _extract_blobs(gdir, spec.commit, staging)
            if missing:
                print(f"  {len(missing)} blobs missing from the mirror, skipped: "
                      f"{', '.join(missing[:5])}", file=sys.stderr)
        staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest


def _archive(gdir: Path, commit: str, dest: Path) -> bool:
    archive = subprocess.Popen(
        ["git", f"--git-dir={gdir}", "archive", "--format=tar", commit],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=False)
    assert archive.stdout is not None
    archive.stdout.close()
    return archive.wait() == 0 and untar.returncode == 0


def _extract_blobs(gdir: Path, commit: str, dest: Path) -> list[str]:
    """Write every regular file and symlink of ``commit`` via ls-tree + cat-file --batch."""
    listing = subprocess.run(
        ["git", f"--git-dir={gdir}", "ls-tree", "-r", "-z", "--full-tree", commit],
        capture_output=True, check=True,
    ).stdout.decode("utf-8", "surrogateescape")
    entries = []
    for record in filter(None, listing.split("\0")):
        meta, path = record.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob":  # submodules (commits) have no content here
            entries.append((mode, sha, path))
    missing: list[str] = []
    batch = subprocess.Popen(
        ["git", f"--git-dir={gdir}", "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert batch.stdin is not None and batch.stdout is not None
    for mode, sha, path in entries:
        batch.stdin.write(sha.encode() + b"\n")
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            missing.append(path)
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)  # the newline after each object
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(data.decode("utf-8", "surrogateescape"))
        else:
            target.write_bytes(data)
            if mode == "100755":
                target.chmod(0o755)
    batch.stdin.close()
    batch.wait()
    return missing


def fresh_copy(src: Path, dest: Path) -> Path:
    """A new copy of ``src`` at ``dest``: what a benchmark may modify or let a tool write into."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest, symlinks=True)
    return dest


# ---------------------------------------------------------------- timing


@dataclass(frozen=True)
class Stats:
    samples: tuple[float, ...]  # wall-clock seconds
    # CPU seconds (user + system) of the same runs, rg and other children included.
    # On a shared machine wall time grows with other people's load; CPU time
    # much less, so it is the figure to compare when the load average is high.
    cpu: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu) if self.cpu else float("nan")


def cpu_now() -> float:
    """CPU seconds used so far by this process and its reaped children (rg, git)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def sample(fn: Callable[[], object], runs: int, warmup: int = 1) -> Stats:
    """Time ``fn`` ``runs`` times after ``warmup`` untimed calls: wall and CPU."""
    for _ in range(warmup):
        fn()
    times, cpu = [], []
    for _ in range(runs):
        cpu_started, started = cpu_now(), time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
        cpu.append(cpu_now() - cpu_started)
    return Stats(tuple(times), tuple(cpu))


@dataclass(frozen=True)
class ChildRun:
    seconds: float  # wall time from spawn to reaped
    cpu_seconds: float  # user + system time of the child and the children it reaped
    max_rss_bytes: int  # the child's own peak resident set size
    returncode: int
    stdout: bytes
    stderr: bytes


def run_child(
    cmd: Sequence[str], cwd: Path | None = None, stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> ChildRun:
    """Run one child process and reap it with wait4, which gives that child's
    own rusage (RUSAGE_CHILDREN would be the maximum over every child so far).

    Output goes to temporary files rather than pipes so the child never blocks
    on a full pipe and the parent needs no reader threads while it waits.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, stdout=out, stderr=err, env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        )
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin)
            proc.stdin.close()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
        out.seek(0)
        err.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        # ru_maxrss is in KiB on Linux.
        return ChildRun(
            seconds, cpu, usage.ru_maxrss * 1024, proc.returncode, out.read(), err.read()
        )


def check(run: ChildRun, what: str) -> ChildRun:
    if run.returncode != 0:
        tail = run.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise SystemExit(f"{what} failed with exit code {run.returncode}:\n" + "\n".join(tail))
    return run


def sample_child(
    cmd: Sequence[str], runs: int, cwd: Path | None = None, warmup: int = 1,
    what: str | None = None,
) -> tuple[Stats, list[ChildRun]]:
    """Wall time of a child process, ``runs`` times after ``warmup`` runs."""
    for _ in range(warmup):
        check(run_child(cmd, cwd), what or " ".join(cmd))
    done = [check(run_child(cmd, cwd), what or " ".join(cmd)) for _ in range(runs)]
    return Stats(tuple(r.seconds for r in done), tuple(r.cpu_seconds for r in done)), done


# ---------------------------------------------------------------- output


def seconds(value: float) -> str:
    """A duration with a unit that keeps three significant figures readable."""
    if value < 1.0:
        return f"{value * 1000:.1f} ms"
    return f"{value:.2f} s"


def spread(stats: Stats) -> str:
    """``median (min–max)`` of a duration."""
    return f"{seconds(stats.median)} ({seconds(stats.min)}–{seconds(stats.max)})"


def mib(value: float) -> str:
    return f"{value / (1024 * 1024):.0f} MiB"


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}×" if denominator > 0 else "n/a"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def tool_path(name: str) -> str:
    """A console script installed beside this interpreter (ctx04, rg), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found beside {sys.executable} or on PATH")
    return found


def machine_line() -> str:
    rg = subprocess.run(
        [tool_path("rg"), "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n", 1)[0]
    cpu = platform.processor() or platform.machine()
    return (
        f"machine: {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()} "
        f"({sys.executable}), {rg}, {platform.platform()}"
    )


def print_header(title: str, argv: Sequence[str]) -> None:
    print(f"## {title}\n")
    print(f"command: `{' '.join(argv)}`  ")
    print(f"{machine_line()}  ")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {load_line()}\n")


def load_line() -> str:
    """The load averages: other work on the machine skews every figure, so say how much."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def repo_heading(spec: RepoSpec, tree: Path, files: int) -> str:
    return (
        f"### {spec.slug} @ {spec.commit[:12]} ({files} source files indexed; tree {tree})\n"
    )
