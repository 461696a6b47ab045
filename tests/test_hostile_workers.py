"""Hostile repositories against the index's readers, workers and disk (issue 26, round 3).

A repository changes under ctx04 while it reads it: a file listed by the walk
can be a FIFO by the time it is opened. The refresh's ``progress`` callback
runs after the stat walk and before any file is read, so a test can make that
change at exactly the moment it would hurt. Parse workers are forked from
whatever refreshes, a warm ``ctx04 mcp`` server included: they must neither
stop it nor outlive it. A full disk must not be kept full by the index's WAL.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from conftest import make_git_repo
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from test_mcp_server import CTX04, server_env, stdio_session, text_of

from ctx04_core import retrieve
from ctx04_core.evidence import HEADER
from ctx04_core.hookspecs import hookimpl
from ctx04_core.index import CodeIndex, IndexUnavailable, RefreshStats, parsing
from ctx04_core.index.refresh import RACY_NS
from ctx04_core.index.workers import WorkerFailed, forked_map
from ctx04_core.pipeline import open_repo, refreshed_repo
from ctx04_core.plugins import plugin_manager
from ctx04_core.regular_file import NotRegularFile, read_regular_file
from ctx04_core.settings import Settings
from ctx04_core.types import Diagnostic

APP = "def use_token():\n    return leak_token()\n"
TASK = "leak_token returns the wrong value"
# How long a test waits before calling a refresh hung (it takes well under a second).
HANG_S = 30


def release(fifo: Path) -> None:
    """Give a reader blocked on ``fifo`` its end of file, so a failing test ends."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as err:
        assert err.errno in (errno.ENXIO, errno.ENOENT)  # nobody is waiting on it


def become_fifo(path: Path) -> Callable[[int, int], None]:
    """A refresh progress callback that replaces ``path`` by a FIFO at its first call."""

    def progress(done: int, total: int) -> None:
        if path.is_file():
            path.unlink()
            os.mkfifo(path)

    return progress


def refresh_facing_a_fifo(root: Path, rel: str, edited: list[str]) -> RefreshStats:
    """Index ``root``, change the ``edited`` files, then refresh again with ``rel``
    (one of them) turned into a FIFO between the stat walk and the read; the
    second refresh's stats.

    The work runs on a thread of its own (SQLite wants the connection used
    there), so the test can stop waiting on a refresh that blocked.

    The files left unedited must be settled by the first refresh, not racily
    clean (changed within ``RACY_NS`` of it, so read again by the second):
    only then does the second refresh report progress, and make the FIFO,
    before its workers read any file. Otherwise the FIFO came after the first
    chunk's answer, and a worker slowed by a busy machine had read the file
    by then.
    """
    pm, settings = plugin_manager(), Settings()
    found: list[RefreshStats] = []
    time.sleep(RACY_NS / 1e9)

    def twice() -> None:
        index = CodeIndex.open(root)
        try:
            refreshed_repo(index, pm, settings)
            for changed in edited:
                with (root / changed).open("a", encoding="utf-8") as edit:
                    edit.write("\n\ndef changed():\n    return 1\n")
            found.append(refreshed_repo(index, pm, settings, become_fifo(root / rel))[1])
        finally:
            index.close()

    refresh = threading.Thread(target=twice, daemon=True)
    refresh.start()
    refresh.join(HANG_S)
    hung = refresh.is_alive()
    release(root / rel)
    refresh.join(HANG_S)
    assert not hung, "the refresh waited on the FIFO"
    return found[0]


def test_the_reader_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(NotRegularFile, match="^not a regular file$"):
        read_regular_file(str(tmp_path / "pipe.py"), 1024)


def test_the_reader_does_not_follow_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text(APP, encoding="utf-8")
    os.symlink("real.py", tmp_path / "link.py")
    with pytest.raises(NotRegularFile):
        read_regular_file(str(tmp_path / "link.py"), 1024)
    assert read_regular_file(str(tmp_path / "real.py"), 1024) == APP.encode()


def test_a_file_that_becomes_a_fifo_before_the_read_costs_that_file_only(
    tmp_path: Path,
) -> None:
    root = make_git_repo(tmp_path / "repo", {"app.py": APP, "churn.py": "def churn():\n    pass\n"})
    stats = refresh_facing_a_fifo(root.resolve(), "churn.py", ["churn.py"])
    assert (stats.parsed, stats.unchanged) == (1, 1)
    assert stats.failures == (("churn.py", "refused", "not a regular file"),)
    # The retrieval after it answers, shows the repository's own file and names the FIFO.
    result = retrieve(TASK, root)
    assert [e.evidence.ref.path for e in result.context.entries if e.included] == ["app.py"]
    assert result.diagnostics == (Diagnostic("excluded", "not a regular file", "churn.py"),)


def test_a_fifo_met_by_the_forked_workers_costs_that_file_only(tmp_path: Path) -> None:
    # Over PARALLEL_MIN_FILES files to read, so forked workers do the reading.
    files: dict[str, str | bytes] = {
        f"pkg/m{i:03}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(300)
    }
    root = make_git_repo(tmp_path / "repo", {"app.py": APP, **files}).resolve()
    # Every file is read again, one of them a FIFO by then.
    stats = refresh_facing_a_fifo(root, "pkg/m150.py", list(files))
    assert stats.failures == (("pkg/m150.py", "refused", "not a regular file"),)
    assert stats.parsed == 300
    repo, _ = open_repo(root, plugin_manager(), Settings())
    try:
        assert len(repo.index.paths()) == 300
        assert repo.source("pkg/m150.py") is None
        assert repo.diagnostics == (
            Diagnostic("excluded", "not a regular file", "pkg/m150.py"),
        )
    finally:
        repo.index.close()


def test_the_renderer_refuses_a_file_that_became_a_fifo(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", {"app.py": APP, "churn.py": "def churn():\n    pass\n"})
    repo, _ = open_repo(root.resolve(), plugin_manager(), Settings())
    try:
        (root / "churn.py").unlink()
        os.mkfifo(root / "churn.py")
        assert repo.source("churn.py") is None
        assert repo.diagnostics == (Diagnostic("excluded", "not a regular file", "churn.py"),)
    finally:
        repo.index.close()


# --- forked workers under a warm server -------------------------------------------------

# A refresh forks its parse workers only with two CPUs or more (index.parsing.read_files).
forks_workers = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="a refresh forks workers only on two CPUs or more"
)

SERVERS = 3
# Over PARALLEL_MIN_FILES, so each server's first refresh forks its parse workers.
MANY_FILES: dict[str, str | bytes] = {
    f"pkg/m{i:03}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(300)
}


def process_table() -> dict[int, tuple[str, int, int]]:
    """Every live process: pid -> (state, parent pid, process group)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat_line = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        state, ppid, pgrp = stat_line.rsplit(")", 1)[1].split()[:3]
        table[int(entry)] = (state, int(ppid), int(pgrp))
    return table


def living(pid: int) -> bool:
    """Running and not a zombie (the client reaps the server only when it closes)."""
    found = process_table().get(pid)
    return found is not None and found[0] != "Z"


def server_pid(repo: Path) -> int:
    """The ``ctx04 mcp --repo REPO`` process this test process started."""
    (pid,) = [
        pid for pid, (_, ppid, _) in process_table().items()
        if ppid == os.getpid()
        and str(repo) in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    ]
    return pid


@dataclass(frozen=True)
class Served:
    first: str  # the first answer's text, or the tool error
    still_alive: bool  # a few seconds after the first answer
    second: str
    survivors: list[int]  # processes of the server's group alive after it ended
    index_after: subprocess.CompletedProcess[str]  # ``ctx04 index`` right after


async def serve_and_stop(repo: Path, cache: Path) -> Served:
    """Two retrieves a few seconds apart from a fresh server, then SIGTERM to it."""
    async with stdio_session(repo, cache) as session:
        pid = server_pid(repo)
        first = text_of(await session.call_tool("retrieve", {"task": "f150 adds the wrong number"}))
        # The servers that stopped by themselves did so within 3 s of their first answer.
        await anyio.sleep(4)
        still_alive = living(pid)
        second = text_of(await session.call_tool("retrieve", {"task": "f7 adds the wrong number"}))
        os.kill(pid, signal.SIGTERM)
        with anyio.fail_after(30):
            while living(pid):
                await anyio.sleep(0.05)
        # The client kills the server's whole group when it closes: look before that.
        group = [p for p, (state, _, pgrp) in process_table().items()
                 if pgrp == pid and state != "Z"]
        index_after = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [CTX04, "index", "--repo", str(repo)], env=server_env(cache),
            capture_output=True, text=True, check=False, timeout=120,
        ))
    return Served(first, still_alive, second, group, index_after)


def test_warm_servers_survive_their_parallel_refresh_and_leave_no_worker(tmp_path: Path) -> None:
    repos = [make_git_repo(tmp_path / f"repo{n}", MANY_FILES).resolve() for n in range(SERVERS)]
    cache = tmp_path / "cache"
    served: dict[Path, Served] = {}

    async def all_servers() -> None:
        async with anyio.create_task_group() as servers:
            for repo in repos:

                async def one(repo: Path = repo) -> None:
                    served[repo] = await serve_and_stop(repo, cache)

                servers.start_soon(one)

    anyio.run(all_servers)
    for repo in repos:
        outcome = served[repo]
        assert outcome.first.startswith(HEADER), outcome.first
        assert "### pkg.m150.f150 [pkg/m150.py:1-2, " in outcome.first
        assert outcome.still_alive
        assert "### pkg.m007.f7 [pkg/m007.py:1-2, " in outcome.second
        assert outcome.survivors == []
        assert outcome.index_after.returncode == 0, outcome.index_after.stderr
        assert outcome.index_after.stdout.startswith("indexed 300 files in ")


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def forked_workers(server: int) -> list[int]:
    """The live processes forked from ``server`` that run its very command line (its
    parse workers, not the rg or git it runs)."""
    return [
        pid for pid, (state, ppid, pgrp) in process_table().items()
        if ppid == server and state != "Z" and cmdline(pid) == cmdline(server)
    ]


# A refresh in a process of its own, with a parser that never returns on one file:
# a worker as stuck as the ones that sat in a FIFO's open.
STUCK_REFRESH = """
import sys, time
from pathlib import Path

from ctx04_core.hookspecs import hookimpl
from ctx04_core.index import CodeIndex
from ctx04_core.pipeline import refreshed_repo
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings

root, stuck = Path(sys.argv[1]), Path(sys.argv[2])


class Stuck:
    @hookimpl(tryfirst=True)
    def parse_file(self, path, text):
        if path == "pkg/m100.py":
            stuck.touch()
            time.sleep(600)
        return None


pm = plugin_manager()
pm.register(Stuck())
refreshed_repo(CodeIndex.open(root), pm, Settings())
"""


@forks_workers
def test_a_stuck_worker_dies_with_its_parent_and_holds_no_lock(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", MANY_FILES).resolve()
    script, stuck = tmp_path / "stuck_refresh.py", tmp_path / "stuck"
    script.write_text(STUCK_REFRESH, encoding="utf-8")
    process = subprocess.Popen([sys.executable, str(script), str(repo), str(stuck)])
    workers: list[int] = []
    try:
        deadline = time.monotonic() + HANG_S
        while not stuck.exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        workers = forked_workers(process.pid)
        process.kill()  # as an out-of-memory killer or a crash would
        process.wait()
        deadline = time.monotonic() + 10  # the kernel ends them with their parent
        while [w for w in workers if living(w)] and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [w for w in workers if living(w)]
        done = subprocess.run(
            [CTX04, "index", "--repo", str(repo)], capture_output=True, text=True, check=False,
            timeout=120,
        )
    finally:
        process.kill()
        for worker in workers:  # were any left behind, they are this test's to end
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)
    assert len(workers) >= 2
    assert survivors == []
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("indexed 300 files in ")


class MisbehavingParser:
    """A parser plugin that does ``misbehave()`` on one file (never returns, or ends
    its process as a crash in a C parser would)."""

    def __init__(self, path: str, misbehave: Callable[[], object]) -> None:
        self.path = path
        self.misbehave = misbehave

    @hookimpl(tryfirst=True)
    def parse_file(self, path: str, text: str) -> None:
        if path == self.path:
            self.misbehave()


@forks_workers
def test_a_worker_that_gives_no_answer_stops_the_refresh_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parsing, "WORKER_ANSWER_TIMEOUT_S", 2.0)
    root = make_git_repo(tmp_path / "repo", MANY_FILES).resolve()
    pm = plugin_manager()
    pm.register(MisbehavingParser("pkg/m100.py", lambda: time.sleep(600)))
    failed: list[BaseException] = []

    def refresh() -> None:
        try:
            open_repo(root, pm, Settings())
        except IndexUnavailable as err:
            failed.append(err)

    refreshing = threading.Thread(target=refresh, daemon=True)
    refreshing.start()
    refreshing.join(HANG_S)
    assert not refreshing.is_alive(), "the refresh waited on the stuck worker"
    assert [str(err) for err in failed] == [
        "a parse worker gave no answer within 2 s; the refresh was stopped"
    ]
    # Ending the refresh killed every worker, the stuck one too.
    assert forked_workers(os.getpid()) == []


@forks_workers
def test_a_worker_that_dies_stops_the_refresh_at_once_with_one_line(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", MANY_FILES).resolve()
    pm = plugin_manager()
    pm.register(MisbehavingParser("pkg/m100.py", lambda: os._exit(3)))
    # No deadline to wait out: the worker's end is the end of its answers.
    with pytest.raises(IndexUnavailable) as failed:
        open_repo(root, pm, Settings())
    assert str(failed.value) == (
        "a parse worker ended without an answer (exit code 3); the refresh was stopped"
    )
    assert forked_workers(os.getpid()) == []


def large_answer(task: int) -> bytes:
    """Task 1's answer outgrows any pipe: its worker blocks in mid-answer until read."""
    return bytes(32 * 1024 * 1024) if task == 1 else b"small"


@forks_workers
def test_workers_closed_in_mid_answer_end_at_once() -> None:
    # multiprocessing.Pool, closed while a worker wrote a large answer, could
    # wait for ever on the rest of it (CI saw ``ctx04 index`` hang on a full disk).
    answers = forked_map(large_answer, [0, 1, 2], processes=2, timeout_s=HANG_S, ahead=2)
    assert next(answers) == b"small"
    time.sleep(0.5)  # task 1's worker is now blocked writing into its full pipe
    closing = threading.Thread(target=answers.close, daemon=True)
    closing.start()
    closing.join(HANG_S)
    assert not closing.is_alive(), "closing waited on a worker in mid-answer"
    assert forked_workers(os.getpid()) == []


def same(task: int) -> int:
    return task


@forks_workers
def test_a_worker_killed_between_tasks_is_reported_at_the_next() -> None:
    # One worker, one task at a time: after the first answer it waits idle.
    answers = forked_map(same, [0, 1, 2], processes=1, timeout_s=HANG_S, ahead=0)
    assert next(answers) == 0
    (worker,) = forked_workers(os.getpid())
    os.kill(worker, signal.SIGKILL)  # as the out-of-memory killer would
    deadline = time.monotonic() + HANG_S
    while living(worker) and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(WorkerFailed) as failed:
        next(answers)
    assert str(failed.value) == "ended without an answer (killed by signal 9)"
    assert forked_workers(os.getpid()) == []


def stuck_parser_distribution(site: Path, stuck: Path) -> Path:
    """An installed third-party plugin (a module and its dist-info, for PYTHONPATH) whose
    parser never returns on pkg/m100.py, touching ``stuck`` when it starts on it."""
    info = site / "ctx04_stuck_parser-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ctx04-stuck-parser\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text("[ctx04]\nstuck = ctx04_stuck_parser\n",
                                           encoding="utf-8")
    (site / "ctx04_stuck_parser.py").write_text(
        "import time\n"
        "from pathlib import Path\n"
        "from ctx04_core.hookspecs import hookimpl\n\n\n"
        "@hookimpl(tryfirst=True)\n"
        "def parse_file(path, text):\n"
        "    if path == 'pkg/m100.py':\n"
        f"        Path({str(stuck)!r}).touch()\n"
        "        time.sleep(600)\n",
        encoding="utf-8",
    )
    return site


@forks_workers
def test_sigterm_ends_a_server_whose_refresh_is_stuck(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", MANY_FILES).resolve()
    stuck, cache = tmp_path / "stuck", tmp_path / "cache"
    site = stuck_parser_distribution(tmp_path / "site", stuck)
    params = StdioServerParameters(
        command=CTX04, args=["mcp", "--repo", str(repo)],
        env={**server_env(cache), "PYTHONPATH": str(site)},
    )

    async def stop_while_stuck() -> tuple[list[int], bool, list[int]]:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            pid = server_pid(repo)
            async with anyio.create_task_group() as calls:

                async def ask() -> None:
                    with contextlib.suppress(MCPError):  # the server leaves before it answers
                        await session.call_tool("retrieve", {"task": "f7 adds the wrong number"})

                calls.start_soon(ask)
                with anyio.fail_after(120):
                    while not stuck.exists():
                        await anyio.sleep(0.01)
                workers = forked_workers(pid)
                os.kill(pid, signal.SIGTERM)
                # Within the grace, not after the stuck worker's 300 s deadline.
                with anyio.move_on_after(30):
                    while living(pid):
                        await anyio.sleep(0.05)
                ended = not living(pid)
                with anyio.move_on_after(10):  # the kernel ends them with their parent
                    while [w for w in workers if living(w)]:
                        await anyio.sleep(0.05)
                calls.cancel_scope.cancel()
            # The client kills the server's whole group when it closes: look before that.
            return workers, ended, [w for w in workers if living(w)]

    workers, ended, survivors = anyio.run(stop_while_stuck)
    assert len(workers) >= 2
    assert ended, "SIGTERM did not end the server within 30 s"
    assert survivors == []
    done = subprocess.run(
        [CTX04, "index", "--repo", str(repo)], env=server_env(cache),
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("indexed 300 files in ")


# --- a full disk ------------------------------------------------------------------------

# Four hundred files whose index outgrows a 1 MiB file system many times over.
WORDY: dict[str, str | bytes] = {
    f"pkg/m{i:03}.py": "".join(
        f"def function_{i}_{j}(alpha, beta):\n"
        f"    '''Compute the thing number {j} for module {i}.'''\n"
        f"    return alpha * {j} + beta - {i}\n\n\n"
        for j in range(20)
    )
    for i in range(400)
}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 1 MiB file system of its own (a tmpfs mounted for the test)."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        # Lazily: a process still holding a file there must not fail the test.
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def test_a_full_disk_leaves_no_write_ahead_log_behind(tmp_path: Path, small_disk: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", WORDY).resolve()
    wal = small_disk / "index.sqlite3-wal"
    full = f"cannot write the index {small_disk / 'index.sqlite3'}: database or disk is full"
    index = CodeIndex.open(repo, small_disk)
    try:
        with pytest.raises(IndexUnavailable) as failed:
            refreshed_repo(index, plugin_manager(), Settings())
        assert str(failed.value) == full
        # The failed refresh closed its pool at once: no worker holds the disk.
        assert forked_workers(os.getpid()) == []
        # The index stays open, as in a warm server: its WAL gave the space back.
        assert wal.stat().st_size == 0
        assert index.check() is None
    finally:
        index.close()
    assert not wal.exists()
    # The CLI says the same in one line, and leaves the same.
    done = subprocess.run(
        [CTX04, "index", "--repo", str(repo), "--index-dir", str(small_disk)],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert (done.returncode, done.stderr) == (2, f"ctx04: error: {full}\n")
    assert sorted(os.listdir(small_disk)) == ["index.sqlite3", "index.sqlite3.lock"]
