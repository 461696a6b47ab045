"""Warm state for a process that answers many retrievals (``ctx04 mcp``).

Plugin managers, the tokenizer and each repository's open code index live as
long as the process. An agent edits files between calls, so every retrieval
must still see the bytes on disk now: a repository's index is refreshed per
file as always, and skipped only when a file-system watcher proves that
nothing under the root changed since the last refresh. Whatever the watcher
cannot prove (it failed to start, lost events, did not answer in time) falls
back to the refresh, whose stat walk is the ground truth.

Folders are replaced under a long-lived process: a root deleted and cloned
again at its path is a folder no watch was put on, and a cache folder cleaned
under the open index leaves it holding a deleted file, whose lock file cannot
be made again. Each call compares both with what is at their paths now, and
starts afresh there when they differ.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import pluggy

from ctx04_core.index import CodeIndex, RefreshStats
from ctx04_core.pipeline import (
    Retrieval,
    checked_task,
    rebuilt_once,
    refreshed_repo,
    require_assemble,
    retrieve_in,
)
from ctx04_core.plugins import enabled_plugins, plugin_manager
from ctx04_core.repository import Repo, resolve_root
from ctx04_core.settings import Settings

log = logging.getLogger(__name__)

# How long a call waits for the watcher to catch up with the file system
# before it falls back to the stat walk.
BARRIER_TIMEOUT_S = 2.0
MARKER_RETOUCH_S = 0.05
# watchfiles hands over a batch of events once none arrived for this long:
# the latency every warm call pays.
WATCH_STEP_MS = 5
WATCH_DEBOUNCE_MS = 100

T = TypeVar("T")


class ChangeWatcher:
    """Whether anything under a folder changed since the last ask.

    Events come from ``watchfiles`` (inotify on Linux) in a thread of their
    own. A question writes a marker file into a folder of the watcher's own
    that is watched too, and waits for the marker's event: events of one
    watcher arrive in the order they happened, so once the marker's has
    arrived, so has every event of an edit made before the question.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._folder = _identity(root)  # the folder watched: the one at the path now
        self._markers = Path(tempfile.mkdtemp(prefix="ctx04-watch-")).resolve()
        self._stop = threading.Event()
        self._seen = threading.Condition()
        self._asked = 0
        self._reached = 0  # the last marker whose event arrived
        # A watcher vouches only for the time since it started.
        self._changed = True
        self._root_deleted = False
        self._alive = True
        self._thread = threading.Thread(
            target=self._watch, name=f"ctx04-watch {root.name}", daemon=True
        )
        self._thread.start()

    def unchanged(self) -> bool:
        """True only when no event under the root arrived since the last call.

        False when one did, and whenever the watcher cannot tell.
        """
        self._asked += 1
        marker = self._markers / str(self._asked)
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        try:
            with self._seen:
                # Touched again while unanswered: a watcher still starting up
                # misses the first touch.
                while self._alive and self._reached < self._asked:
                    if time.monotonic() > deadline:
                        return False
                    marker.touch()
                    self._seen.wait(MARKER_RETOUCH_S)
                if not self._alive:
                    return False
                # Every event taken here is older than the refresh the caller
                # makes when this says False, so that refresh sees its bytes.
                changed, self._changed = self._changed, False
                return not changed
        except OSError:
            return False
        finally:
            marker.unlink(missing_ok=True)

    def follows_root(self) -> bool:
        """Whether the folder at the root's path is the one watched.

        A root deleted and made again (a fresh clone) is a new folder that no
        watch was ever put on: none of its edits would arrive. Its inode may be
        the deleted one's again, so the root's own deletion event counts too.
        """
        with self._seen:
            deleted = self._root_deleted
        return not deleted and _identity(self.root) == self._folder

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        shutil.rmtree(self._markers, ignore_errors=True)

    def _watch(self) -> None:
        import watchfiles

        markers = str(self._markers)
        root = str(self.root)
        try:
            for changes in watchfiles.watch(
                self.root, self._markers, watch_filter=None, debounce=WATCH_DEBOUNCE_MS,
                step=WATCH_STEP_MS, stop_event=self._stop, rust_timeout=0,
                raise_interrupt=False, ignore_permission_denied=True,
            ):
                reached = [
                    int(name)
                    for _, path in changes
                    if os.path.dirname(path) == markers
                    and (name := os.path.basename(path)).isdigit()
                ]
                elsewhere = any(not path.startswith(markers) for _, path in changes)
                root_deleted = (watchfiles.Change.deleted, root) in changes
                with self._seen:
                    self._changed = self._changed or elsewhere
                    self._root_deleted = self._root_deleted or root_deleted
                    self._reached = max([self._reached, *reached])
                    self._seen.notify_all()
        except Exception as err:  # noqa: BLE001 - any failure means: refresh every call
            log.warning("ctx04: not watching %s (%s); every call refreshes the index",
                        self.root, err)
        finally:
            with self._seen:
                self._alive = False
                self._seen.notify_all()


@dataclass(frozen=True)
class _Refreshed:
    """What the last refresh established, and under which plugins and settings."""

    key: tuple[object, ...]
    repo: Repo
    stats: RefreshStats


class WarmRepository:
    """One repository's open index, its watcher, and the one thread that does its work.

    Work on one repository is serialised on its thread (the index is one
    SQLite connection, and a refresh must not interleave with a read);
    different repositories work side by side.
    """

    def __init__(self, root: Path, index_dir: Path | None) -> None:
        self.root = root
        self.index_dir = index_dir
        self._watcher = ChangeWatcher(root)
        self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"ctx04 {root.name}")
        self._index: CodeIndex | None = None
        self._index_file: tuple[int, int] | None = None  # the open index's file when refreshed
        self._refreshed: _Refreshed | None = None

    def submit(self, work: Callable[[], T]) -> Future[T]:
        return self._worker.submit(work)

    def opened(
        self, pm: pluggy.PluginManager, settings: Settings, *, force: bool = False
    ) -> tuple[Repo, RefreshStats]:
        """The repository as the stages see it, its index up to date (on its thread)."""
        started = time.perf_counter()
        key = (enabled_plugins(pm), settings.exclude_globs, settings.max_file_bytes)
        resolve_root(self.root)  # while the root is missing, a call fails as the CLI's does
        if not self._watcher.follows_root():
            self._watcher.close()
            self._watcher = ChangeWatcher(self.root)
        if self._index is not None and _identity(self._index.path) != self._index_file:
            # The file at the index's path is not the one open: its folder was cleaned
            # (a cache may be, at any time) or another process rebuilt it. Open that one.
            self._close_index()
        unchanged = self._watcher.unchanged()
        last = self._refreshed
        if last is not None and last.key == key and unchanged and not force:
            files = last.stats.files
            return last.repo.reopened(), replace(
                last.stats, parsed=0, unchanged=files, removed=0,
                seconds=time.perf_counter() - started, recovered=None,
            )
        # Until this refresh succeeds, nothing is known to be current.
        self._refreshed = None
        if self._index is None:
            self._index = CodeIndex.open(self.root, self.index_dir)
        repo, stats = refreshed_repo(self._index, pm, settings)
        # After the refresh: one that found the index unreadable rebuilt it in a new file.
        self._index_file = _identity(self._index.path)
        self._refreshed = _Refreshed(key, repo, stats)
        return repo.reopened(), stats

    def retrieve(
        self, pm: pluggy.PluginManager, task: str, *, latest_error: str | None,
        test: str | None, settings: Settings,
    ) -> Retrieval:
        """What :func:`ctx04_core.pipeline.retrieve` gives, from the warm index (on its thread)."""
        started = time.perf_counter()
        task, latest_error, test, notes = checked_task(task, latest_error, test, settings)
        require_assemble(pm)

        def attempt() -> Retrieval:
            workspace, stats = self.opened(pm, settings)
            return retrieve_in(
                workspace, stats, pm, task, latest_error=latest_error, test=test,
                settings=settings, notes=notes, started=started,
            )

        return rebuilt_once(attempt, self._discard)

    def _discard(self, err: Exception) -> str:
        self._close_index()
        return CodeIndex.discard(self.root, self.index_dir, err)

    def close(self) -> None:
        """Finish the work under way, then close the index (on its thread) and stop watching."""
        self._worker.submit(self._close_index).result()
        self._worker.shutdown(wait=True)
        self._watcher.close()

    def _close_index(self) -> None:
        self._refreshed = None  # its repository reads through the index
        if self._index is not None:
            self._index.close()
            self._index = None


def _identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of what is at ``path`` now; None when nothing is."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class WarmState:
    """Everything a long-lived process keeps: plugin managers and warm repositories."""

    def __init__(self, index_dirs: Mapping[Path, Path]) -> None:
        self.index_dirs = index_dirs  # repositories whose index is not in the user's cache
        self._lock = threading.Lock()
        self._repos: dict[Path, WarmRepository] = {}
        self._managers: dict[tuple[str, ...], pluggy.PluginManager] = {}

    def plugin_manager(self, disable: Iterable[str] = ()) -> pluggy.PluginManager:
        """One manager per set of disabled plugins, loaded once."""
        key = tuple(sorted(set(disable)))
        with self._lock:
            if key not in self._managers:
                self._managers[key] = plugin_manager(disable=key)
            return self._managers[key]

    def repository(self, root: Path) -> WarmRepository:
        with self._lock:
            if root not in self._repos:
                self._repos[root] = WarmRepository(root, self.index_dirs.get(root))
            return self._repos[root]

    def close(self) -> None:
        with self._lock:
            repos, self._repos = list(self._repos.values()), {}
        for repo in repos:
            repo.close()
