"""The code index of one repository, as its users hold it: :class:`CodeIndex`.

The work is in the modules beside this one: :mod:`~ctx04_core.index.opening`
(the SQLite file, its lock and its recovery), :mod:`~ctx04_core.index.refresh`
(bringing the rows up to date, file by file) with :mod:`~ctx04_core.index.parsing`
(reading and parsing the files it must), :mod:`~ctx04_core.index.queries` (what
the stages ask) and :mod:`~ctx04_core.index.values` (what plugins keep).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pluggy

from ctx04_core.index import opening, refresh, schema
from ctx04_core.index.opening import IndexUnavailable
from ctx04_core.index.queries import IndexQueries
from ctx04_core.index.refresh import RefreshStats
from ctx04_core.index.values import StoredValues
from ctx04_core.settings import Settings


class CodeIndex(IndexQueries, StoredValues):
    """Definitions, references and descriptions of one repository's source files.

    Reads need no lock (SQLite's WAL lets them run beside a writer); opening
    and :meth:`refresh` hold an exclusive lock on a file beside the database,
    so concurrent processes take turns and the later one finds the earlier
    one's work.
    """

    def __init__(self, root: Path, path: Path, conn: sqlite3.Connection, recovered: str | None):
        super().__init__(conn)
        self.root = root
        self.path = path
        self.recovered = recovered  # one line when an unreadable index was replaced

    @staticmethod
    def location(root: Path, index_dir: Path | None = None) -> Path:
        """The index file of the repository at ``root``."""
        return opening.location(root, index_dir)

    @classmethod
    def discard(cls, root: Path, index_dir: Path | None, err: Exception) -> str:
        """Move a damaged index aside, so the next open builds a new one; says what was done."""
        return opening.discard(root, index_dir, err)

    def check(self) -> str | None:
        """SQLite's integrity check: None when the index is sound, else its first complaint."""
        try:
            rows = self._conn.execute("PRAGMA integrity_check").fetchall()
        except sqlite3.DatabaseError as err:
            return str(err)
        first = str(rows[0][0]) if rows else "no answer"
        return None if first == "ok" else first

    @classmethod
    def open(cls, root: Path, index_dir: Path | None = None) -> CodeIndex:
        root = root.resolve()
        path, conn, recovered = opening.connect(root, index_dir)
        return cls(root, path, conn, recovered)

    def close(self) -> None:
        self._conn.close()

    def refresh(
        self,
        pm: pluggy.PluginManager,
        globs: tuple[str, ...],
        settings: Settings,
        progress: Callable[[int, int], None] | None = None,
    ) -> RefreshStats:
        """Bring the index up to date with the files ``globs`` match under the root."""
        started = time.perf_counter()
        paths, refused = refresh.sources(self.root, globs, settings)
        self._forget()
        with opening.exclusive(self.path, self.root):
            try:
                counts = refresh.update(
                    self._conn, self.root, self.path, pm, paths, refused, settings, progress
                )
            except sqlite3.DatabaseError as err:
                if not schema.is_corruption(err):
                    raise IndexUnavailable(f"cannot write the index {self.path}: {err}") from err
                self._conn.close()
                self._conn, self.recovered = opening.recover(self.path, err)
                counts = refresh.update(
                    self._conn, self.root, self.path, pm, paths, refused, settings, progress
                )
        parsed, unchanged, removed, summary = counts
        return RefreshStats(
            files=len(paths),
            parsed=parsed,
            unchanged=unchanged,
            removed=removed,
            nodes=summary.nodes,
            edges=summary.edges,
            failures=summary.failures,
            languages=summary.languages,
            seconds=time.perf_counter() - started,
            recovered=self.recovered,
        )
