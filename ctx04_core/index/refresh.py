"""Refreshing the index: its rows brought up to date with the repository's files, file by file.

Each file's row carries its size, mtime and key ``sha256(bytes + path)``; a
refresh re-reads a file only when its size or mtime changed and re-parses it
only when its key changed (or the enabled parsers did). A file that cannot be
parsed keeps a row with its status and no nodes, so it is not retried until
it changes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy

from ctx04_core import ripgrep
from ctx04_core.index import parsing, statuses
from ctx04_core.index.opening import IndexUnavailable, abandon, begin, lock_path
from ctx04_core.index.queries import failed_files, parsed_languages
from ctx04_core.paths import nameable
from ctx04_core.settings import Settings
from ctx04_core.types import MODULE

# Rows are flushed to SQLite every this many files, inside the one transaction.
BATCH_FILES = 256

# A file changed within this long of being read may change again without
# its stat showing it (a coarse clock, an edit in the same tick): git calls
# it "racily clean". Its row keeps no stat, so the next refresh hashes it.
RACY_NS = 2_000_000_000
# Marks the stat of a row made without reading the file (see _changed).
_UNREAD = "unread:"


@dataclass(frozen=True)
class RefreshStats:
    files: int  # source files matched by the globs
    parsed: int  # files read and (re)recorded in this refresh, parsed or failed
    unchanged: int  # files skipped because their stat or key was unchanged
    removed: int  # files dropped because they vanished
    nodes: int  # total nodes in the index after refresh
    edges: int  # total edges after refresh
    # (path, status, message) of every indexed file that is not parsed:
    # syntax_error, too_complex (over the parse budget), too_large, binary,
    # not_utf8, unreadable, no_parser; partial: parsed, with regions the
    # parser skipped; and refused: a source the index does not read (a link
    # out of the repository or a loop, which the listing and so ``files``
    # leave out; a listed file replaced since by a FIFO, a folder or a link).
    failures: tuple[tuple[str, str, str], ...]
    # (language, files) of the files parsed in whole or in part, most files first.
    languages: tuple[tuple[str, int], ...]
    seconds: float
    recovered: str | None = None  # set when an unreadable index file was replaced

    def summary(self) -> str:
        """The line ``ctx04 index`` (and the MCP ``index`` tool) prints."""
        refused = sum(status == statuses.REFUSED for _, status, _ in self.failures)
        return (
            f"indexed {self.files} files in {self.seconds:.2f} s: "
            f"{self.parsed} parsed, {self.unchanged} unchanged, {self.removed} removed; "
            f"{self.nodes} nodes, {self.edges} edges, "
            f"{len(self.failures) - refused} not parsed in full"
            + (f", {refused} refused" if refused else "")
        )


@dataclass(frozen=True)
class _Summary:
    """What a refresh reports of the whole index (see RefreshStats)."""

    nodes: int
    edges: int
    failures: tuple[tuple[str, str, str], ...]
    languages: tuple[tuple[str, int], ...]



@dataclass(frozen=True)
class _Read:
    """A file whose stat changed: it must be read, and perhaps parsed again."""

    rel: str
    file_id: int | None  # of its row, if it has one
    known_key: str  # the stored key, when the stored row can be trusted; else ""
    size: int
    stat: str  # its _stat_key
    settled: str  # the stat to keep once read: "" while it is racily clean


def sources(
    root: Path, globs: tuple[str, ...], settings: Settings
) -> tuple[list[str], dict[str, str]]:
    """The files ``globs`` match under ``root``, and the entries refused (with why)."""
    try:
        # The walk for refused sources runs while rg lists the files: each
        # takes a few tenths of a second on 50,000 files, on its own core.
        with ThreadPoolExecutor(1, thread_name_prefix="ctx04-refused") as walker:
            walking = walker.submit(
                ripgrep.refused_sources, root, globs, settings.exclude_globs
            )
            listed = ripgrep.list_files(
                root, globs, settings.exclude_globs, settings.search_timeout_s
            )
            refused = walking.result()
    except ripgrep.SearchUnavailable as err:
        raise IndexUnavailable(str(err)) from err
    # A file name that is not UTF-8 cannot be stored, nor named to a model.
    paths = [rel for rel in listed if nameable(rel)]
    refused = {rel: why for rel, why in refused.items() if nameable(rel)}
    return paths, refused


def update(
    conn: sqlite3.Connection,
    root: Path,
    index_path: Path,
    pm: pluggy.PluginManager,
    paths: list[str],
    refused: dict[str, str],
    settings: Settings,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, int, int, _Summary]:
    """Bring the rows of ``paths`` and ``refused`` up to date, in one transaction, and
    drop the others: (files parsed, unchanged, removed) and the index's summary.
    The caller holds the writer lock."""
    # Plain dicts built by SQLite's rows: an object per file cost more
    # than the stat walk itself on 50,000 files.
    ids: dict[str, int] = dict(conn.execute("SELECT path, id FROM files"))
    # What a file's row says depends on the parsers and their budget too:
    # when they change (a parser disabled for an ablation, then enabled
    # again; a larger parse_max_depth), no stored row can be trusted.
    fingerprint = _fingerprint(pm, settings)
    row = conn.execute("SELECT value FROM meta WHERE key = 'parsers'").fetchone()
    # Per trusted row, the stat the file must have for the row to stand
    # (see _changed); a racily clean row keeps "" as its stat, which no
    # file's stat equals.
    standing: dict[str, str] = {}
    if row is not None and row[0] == fingerprint:
        standing = dict(conn.execute(
            f"SELECT path, CASE key WHEN '' THEN '{_UNREAD}' || stat ELSE stat END FROM files"
        ))
    writer = _Writer(conn)
    parsed = unchanged = 0
    # Paths joined as strings: a Path per file made the stat walk of a
    # 50,000-file repository four times as slow.
    top = f"{root}{os.sep}"
    # Taken before any file is read, so a file read later is never
    # wrongly taken as settled (see RACY_NS).
    now = time.time_ns()
    begin(conn)
    try:
        reads: list[_Read] = []
        for rel in paths:
            change = _changed(conn, writer, top, rel, ids.get(rel), standing.get(rel),
                              settings, now)
            if isinstance(change, _Read):
                reads.append(change)
            elif change:
                parsed += 1
            else:
                unchanged += 1
        if progress is not None and len(reads) < len(paths):
            progress(len(paths) - len(reads), len(paths))
        # Closed here when the write fails, so its workers end now, not
        # whenever the failure's traceback is let go.
        with closing(
            parsing.read_files(top, [(r.rel, r.known_key) for r in reads], pm, settings)
        ) as outcomes:
            for done, (read, outcome) in enumerate(zip(reads, outcomes, strict=True), 1):
                if outcome.key and outcome.key == read.known_key:
                    assert read.file_id is not None
                    writer.touch(read.file_id, read.size, read.settled)
                    unchanged += 1
                else:
                    writer.record(read.rel, read.file_id, read.size,
                                  read.settled if outcome.key else read.stat, outcome)
                    parsed += 1
                if done % BATCH_FILES == 0:
                    writer.flush()
                    # A heartbeat for processes waiting on the lock: still busy.
                    lock_path(index_path).touch()
                if progress is not None:
                    progress(len(paths) - len(reads) + done, len(paths))
        # Entries the listing passed over (a link out of the root, a link
        # loop) are recorded, never opened, so coverage can name them.
        for rel, reason in refused.items():
            writer.record(rel, ids.get(rel), 0, "", parsing.Outcome("", statuses.REFUSED, reason))
        listed = set(paths) | refused.keys()
        gone = [file_id for p, file_id in ids.items() if p not in listed]
        writer.delete_files(gone)
        writer.flush()
        if row is None or row[0] != fingerprint:
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('parsers', ?)",
                (fingerprint,),
            )
        summary = _summary(conn, written=bool(parsed or gone or refused))
        conn.execute("COMMIT")
    except BaseException:
        abandon(conn)
        raise
    return parsed, unchanged, len(gone), summary


def _summary(conn: sqlite3.Connection, written: bool) -> _Summary:
    """The counts and lists a refresh reports, counted again only after a write.

    Counting 2 million edges and grouping 50,000 files took a third of a
    nothing-changed refresh; the index keeps the last counts beside the
    rows they count, written in the same transaction. ctx04 before this
    rewrote the 'parsers' row of meta on every refresh and never the
    counts, and a rewritten row takes a rowid above every other: counts
    older than the 'parsers' row may be stale and are counted again.
    """
    kept = {key: (rowid, value) for key, rowid, value in conn.execute(
        "SELECT key, rowid, value FROM meta WHERE key IN ('parsers', 'summary')"
    )}
    if not written and "summary" in kept and kept["summary"][0] > kept["parsers"][0]:
        nodes, edges, failures, languages = json.loads(kept["summary"][1])
        return _Summary(nodes, edges, tuple(map(tuple, failures)),
                        tuple(map(tuple, languages)))
    nodes, edges = conn.execute(
        "SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM edges)"
    ).fetchone()
    summary = _Summary(nodes, edges, tuple(failed_files(conn)), tuple(parsed_languages(conn)))
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('summary', ?)",
        (json.dumps([nodes, edges, summary.failures, summary.languages]),),
    )
    return summary


def _changed(
    conn: sqlite3.Connection,
    writer: _Writer,
    top: str,
    rel: str,
    file_id: int | None,
    standing: str | None,
    settings: Settings,
    now: int,
) -> _Read | bool:
    """False when the file's stat shows it unchanged; True when its row was
    written without reading it (it cannot be read); else the read it needs.

    ``standing`` is the stat a trusted row needs, prefixed with _UNREAD for
    a row of a file never read (too large, unreadable): with a new size
    limit, the same stat can deserve a different row.
    """
    try:
        st = os.stat(top + rel)
    except OSError as err:
        writer.record(rel, file_id, 0, "", parsing.Outcome(
            "", statuses.UNREADABLE, parsing.reason(err)
        ))
        return True
    too_large = st.st_size > settings.max_file_bytes
    stat = _stat_key(st)
    if standing is not None and standing == (_UNREAD + stat if too_large else stat):
        return False
    if too_large:
        # A row for a file never read keeps its stat: it cannot be racy.
        writer.record(rel, file_id, st.st_size, stat, parsing.Outcome(
            "", statuses.TOO_LARGE, parsing.too_large(st.st_size, settings)
        ))
        return True
    known_key = ""
    if standing is not None:
        (known_key,) = conn.execute(
            "SELECT key FROM files WHERE path = ?", (rel,)
        ).fetchone()
    settled = "" if now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS else stat
    return _Read(rel, file_id, known_key, st.st_size, stat, settled)


class _Writer:
    """Buffers one refresh's rows and writes them with ``executemany``.

    Ids are assigned here rather than by SQLite so nodes, edges and FTS rows
    can be written in bulk without reading ids back.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.next_file, self.next_node = conn.execute(
            "SELECT (SELECT coalesce(max(id), 0) + 1 FROM files), "
            "(SELECT coalesce(max(id), 0) + 1 FROM nodes)"
        ).fetchone()
        self.cleared: list[tuple[int]] = []
        self.deleted: list[tuple[int]] = []
        self.touched: list[tuple[int, str, int]] = []
        self.files: list[tuple[Any, ...]] = []
        self.nodes: list[tuple[Any, ...]] = []
        self.edges: list[tuple[int, str, str, str, int]] = []
        self.fts: list[tuple[int, str]] = []
        self.code: list[tuple[int, str]] = []
        self.values: list[tuple[int, str, bytes]] = []

    def touch(self, file_id: int, size: int, stat: str) -> None:
        self.touched.append((size, stat, file_id))

    def record(
        self, path: str, file_id: int | None, size: int, stat: str, outcome: parsing.Outcome
    ) -> None:
        """Write the file's row, replacing the one with ``file_id`` if given."""
        if file_id is None:
            file_id = self.next_file
            self.next_file += 1
        else:
            self.cleared.append((file_id,))
        rows = outcome.rows
        self.files.append(
            (file_id, path, outcome.key, size, stat, rows.language if rows else "",
             outcome.status, outcome.message, rows.statements if rows else "[]")
        )
        if rows is None:
            return
        first = self.next_node
        self.next_node += len(rows.nodes)
        self.nodes.extend((first + i, file_id, *node) for i, node in enumerate(rows.nodes))
        for i, (node, (description, code)) in enumerate(zip(rows.nodes, rows.terms, strict=True)):
            if node[2] != MODULE:
                self.fts.append((first + i, description))
            self.code.append((first + i, code))
        self.edges.extend((first + at, *edge) for at, *edge in rows.edges)
        self.values.extend((first + at, key, value) for at, key, value in rows.values)

    def delete_files(self, file_ids: list[int]) -> None:
        for file_id in file_ids:
            self.cleared.append((file_id,))
            self.deleted.append((file_id,))

    def flush(self) -> None:
        conn = self.conn
        nodes_of = "SELECT id FROM nodes WHERE file_id = ?"
        conn.executemany(f"DELETE FROM edges WHERE src_node_id IN ({nodes_of})", self.cleared)
        conn.executemany(f"DELETE FROM api_fts WHERE rowid IN ({nodes_of})", self.cleared)
        conn.executemany(f"DELETE FROM code_fts WHERE rowid IN ({nodes_of})", self.cleared)
        conn.executemany(f"DELETE FROM node_values WHERE node_id IN ({nodes_of})", self.cleared)
        conn.executemany("DELETE FROM nodes WHERE file_id = ?", self.cleared)
        conn.executemany("DELETE FROM files WHERE id = ?", self.deleted)
        conn.executemany("UPDATE files SET size = ?, stat = ? WHERE id = ?", self.touched)
        conn.executemany(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", self.files
        )
        conn.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self.nodes)
        conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?)", self.edges)
        conn.executemany("INSERT INTO api_fts(rowid, tokens) VALUES (?, ?)", self.fts)
        conn.executemany("INSERT INTO code_fts(rowid, tokens) VALUES (?, ?)", self.code)
        conn.executemany("INSERT OR REPLACE INTO node_values VALUES (?, ?, ?)", self.values)
        for rows in (self.cleared, self.deleted, self.touched, self.files, self.nodes,
                     self.edges, self.fts, self.code, self.values):
            rows.clear()


def _fingerprint(pm: pluggy.PluginManager, settings: Settings) -> str:
    """The parsers a row depends on, by module or class, and version, and their budget."""
    impls = pm.hook.parse_file.get_hookimpls()
    # A version is read from its distribution's metadata file: only the parsers'.
    parsing = {id(impl.plugin) for impl in impls}
    versions = {
        id(plugin): dist.version
        for plugin, dist in pm.list_plugin_distinfo() if id(plugin) in parsing
    }
    parsers = []
    for impl in impls:
        plugin = impl.plugin
        name = getattr(plugin, "__name__", None) or (
            f"{type(plugin).__module__}.{type(plugin).__qualname__}"
        )
        parsers.append(f"{name}=={versions.get(id(plugin), '')}")
    budget = f"parse budget: {settings.parse_max_depth} levels, {settings.parse_deadline_s:g} s"
    return json.dumps([*sorted(parsers), budget])


def _stat_key(st: os.stat_result) -> str:
    """What must stay equal for a file to be taken as unchanged without reading it.

    As git does: size, mtime, ctime and inode. ``touch -r`` restores an
    mtime but not the ctime, which only the kernel sets; an editor that
    replaces the file changes the inode.
    """
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
