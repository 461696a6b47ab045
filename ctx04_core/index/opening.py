"""Opening the index file: where it lives, the writer lock, recovery of a damaged file.

Each repository's index is one SQLite file in the user's cache. Opening it
creates, migrates (:mod:`ctx04_core.index.schema`) or, when SQLite cannot
read it, moves it aside and rebuilds it. Writers, in this process or
another, take turns through an exclusive lock on a file beside it. Every
write starts and is given up the same way (:func:`begin`, :func:`abandon`),
so one that fails, on a full disk say, gives back the WAL space it took.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import platformdirs

from ctx04_core.index import schema
from ctx04_core.index.workers import not_inherited

DB_NAME = "index.sqlite3"
LOCK_TIMEOUT_S = 60.0


class IndexUnavailable(Exception):
    """The index cannot be opened or written; the message is one clear line."""


def location(root: Path, index_dir: Path | None = None) -> Path:
    """The index file of the repository at ``root``."""
    root = root.resolve()
    if index_dir is None:
        digest = hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16]
        index_dir = platformdirs.user_cache_path("ctx04") / f"{digest}-{root.name}"
    return index_dir / DB_NAME


def connect(root: Path, index_dir: Path | None) -> tuple[Path, sqlite3.Connection, str | None]:
    """The index file of the repository at ``root`` (resolved), and a connection to
    it; with one line when an unreadable index was replaced, else None."""
    path = location(root, index_dir)
    index_dir = path.parent
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise IndexUnavailable(f"cannot create the index folder {index_dir}: {err}") from err
    with exclusive(path, root):
        conn, recovered = _connect_or_recover(path)
    return path, conn, recovered


def discard(root: Path, index_dir: Path | None, err: Exception) -> str:
    """Move a damaged index aside, so the next open builds a new one; says what was done."""
    path = location(root, index_dir)
    with exclusive(path, root.resolve()):
        return _moved_aside(path, err)


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _progress_mark(path: Path) -> tuple[tuple[int, int], ...]:
    """Size and mtime of the index, its WAL and the lock file (touched after each
    batch of files): they change while a builder makes progress."""
    marks = []
    for where in (path, path.with_name(path.name + "-wal"), lock_path(path)):
        try:
            st = os.stat(where)
        except OSError:
            marks.append((-1, -1))
        else:
            marks.append((st.st_size, st.st_mtime_ns))
    return tuple(marks)


def _connect_or_recover(path: Path) -> tuple[sqlite3.Connection, str | None]:
    try:
        return schema.connect(path), None
    except sqlite3.DatabaseError as err:
        if not schema.is_corruption(err):
            raise IndexUnavailable(f"cannot open the index {path}: {err}") from err
        return recover(path, err)


def recover(path: Path, err: sqlite3.DatabaseError) -> tuple[sqlite3.Connection, str]:
    note = _moved_aside(path, err)
    return schema.connect(path), note


def _moved_aside(path: Path, err: Exception) -> str:
    aside = schema.move_aside(path)
    return f"the index was unreadable ({err}); moved it to {aside.name} and rebuilt it"


@contextmanager
def exclusive(path: Path, root: Path) -> Iterator[None]:
    """Hold the index's writer lock, waiting while its holder makes progress.

    A cold build of a large repository holds the lock for minutes; a waiter
    gives up only after ``LOCK_TIMEOUT_S`` in which the index and its WAL did
    not change, i.e. when the holder is stuck, not when it is busy.
    """
    lock = lock_path(path)
    try:
        handle = open(lock, "a+b")  # noqa: SIM115 - closed by the with below
    except OSError as err:
        raise IndexUnavailable(
            f"cannot write the index folder {path.parent}: {err.strerror or err}; "
            "give a writable one with --index-dir"
        ) from err
    with handle, not_inherited(handle.fileno()):
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        seen = _progress_mark(path)
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                mark = _progress_mark(path)
                if mark != seen:
                    seen, deadline = mark, time.monotonic() + LOCK_TIMEOUT_S
                elif time.monotonic() >= deadline:
                    raise IndexUnavailable(
                        f"another ctx04 process is indexing {root}; try again when it finishes"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def begin(conn: sqlite3.Connection) -> None:
    """Start a write, the WAL's committed frames first copied into the database.

    So a write that fails leaves nothing in the WAL but its own frames, which
    :func:`abandon` can give back: a WAL that held committed frames could
    only be truncated after copying them, and on a full disk that copy fails
    too, leaving the WAL to keep the disk full.
    """
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    conn.execute("BEGIN IMMEDIATE")


def abandon(conn: sqlite3.Connection) -> None:
    """Roll back a failed write and truncate the WAL its frames grew (a full disk's
    space back); the write's own error is the one to report."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    with suppress(sqlite3.Error):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
