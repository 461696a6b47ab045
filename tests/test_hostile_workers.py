"""Hostile repositories against the index's readers and workers (issue 26, round 3).

A repository changes under ctx04 while it reads it: a file listed by the walk
can be a FIFO by the time it is opened. The refresh's ``progress`` callback
runs after the stat walk and before any file is read, so a test can make that
change at exactly the moment it would hurt.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_git_repo

from ctx04_core import retrieve
from ctx04_core.index import CodeIndex, RefreshStats
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
    """
    pm, settings = plugin_manager(), Settings()
    found: list[RefreshStats] = []

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
