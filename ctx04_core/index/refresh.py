"""Refreshing the index: its rows brought up to date with the repository's files, file by file.

Each file's row carries its size, mtime and key ``sha256(bytes + path)``; a
refresh re-reads a file only when its size or mtime changed and re-parses it
only when its key changed (or the enabled parsers did). A file that cannot be
parsed keeps a row with its status and no nodes, so it is not retried until
it changes.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from multiprocessing.pool import IMapIterator
from pathlib import Path
from typing import Any

import pluggy

from ctx04_core import ripgrep
from ctx04_core.index.opening import IndexUnavailable, abandon, begin, lock_path
from ctx04_core.index.queries import failed_files, parsed_languages
from ctx04_core.index.workers import forked_pool
from ctx04_core.parse_budget import TooComplex
from ctx04_core.paths import nameable
from ctx04_core.regular_file import FileTooLarge, NotRegularFile, read_regular_file
from ctx04_core.settings import Settings
from ctx04_core.text import source_text, split_lines, tokenize
from ctx04_core.types import Node, NodeValues, ParsedFile

# Rows are flushed to SQLite every this many files, inside the one transaction.
BATCH_FILES = 256
# A refresh that reads at least this many files parses them in forked worker
# processes (one per CPU), this many files to a task, at most two windows of
# files in flight; fewer are parsed in the process itself.
PARALLEL_MIN_FILES = 256
PARALLEL_CHUNK = 16
PARALLEL_WINDOW = 1024
_FORK = "fork" in multiprocessing.get_all_start_methods()
# A worker's answer (PARALLEL_CHUNK files read and parsed) that has not come
# within this long means the worker is stuck: the refresh fails with one
# line rather than wait for ever, and closing the pool ends the workers.
WORKER_ANSWER_TIMEOUT_S = 300.0
# In a forked worker, what it parses with: the root (as a prefix), the
# plugin manager and the settings.
_forked: tuple[str, pluggy.PluginManager, Settings] | None = None

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
    # not_utf8, unreadable, no_parser; and partial: parsed, with regions the
    # parser skipped.
    failures: tuple[tuple[str, str, str], ...]
    # (language, files) of the files parsed in whole or in part, most files first.
    languages: tuple[tuple[str, int], ...]
    seconds: float
    recovered: str | None = None  # set when an unreadable index file was replaced


@dataclass(frozen=True)
class _Summary:
    """What a refresh reports of the whole index (see RefreshStats)."""

    nodes: int
    edges: int
    failures: tuple[tuple[str, str, str], ...]
    languages: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class _Outcome:
    """What reading and parsing one file gave."""

    key: str
    status: str
    message: str = ""
    rows: _Rows | None = None  # of a file parsed in whole or in part


@dataclass(frozen=True)
class _Rows:
    """A parsed file as the index stores it, in plain tuples: a worker process
    sends them back far more cheaply than the parser's dataclasses."""

    language: str
    statements: str  # the multiline statements, as JSON
    # Per node: qualname, name, kind, start, end, header_end, signature, docstring.
    nodes: tuple[tuple[str, str, str, int, int, int, str, str], ...]
    # Per node: the terms of its description ("" for a module) and of its own code.
    terms: tuple[tuple[str, str], ...]
    # Per edge: the index of its node in ``nodes``, kind, target, target's last name, line.
    edges: tuple[tuple[int, str, str, str, int], ...]
    # What plugins derived from its nodes (``node_values``): node index, key, value.
    values: tuple[tuple[int, str, bytes], ...] = ()


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
            _outcomes(top, [(r.rel, r.known_key) for r in reads], pm, settings)
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
            writer.record(rel, ids.get(rel), 0, "", _Outcome("", "refused", reason))
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
        writer.record(rel, file_id, 0, "", _Outcome("", "unreadable", _reason(err)))
        return True
    too_large = st.st_size > settings.max_file_bytes
    stat = _stat_key(st)
    if standing is not None and standing == (_UNREAD + stat if too_large else stat):
        return False
    if too_large:
        # A row for a file never read keeps its stat: it cannot be racy.
        writer.record(rel, file_id, st.st_size, stat,
                      _Outcome("", "too_large", _too_large(st.st_size, settings)))
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
        self, path: str, file_id: int | None, size: int, stat: str, outcome: _Outcome
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
            if node[2] != "module":
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


def _lines_by_innermost(nodes: tuple[Node, ...], n_lines: int) -> dict[Node, list[int]]:
    """The file's lines partitioned by their innermost node.

    Not a node's own lines (``stages.regions.node_own_lines``): a function
    owns the lines of a function nested in it, but the code search must
    index each line's words once, under the definition that holds it most
    closely. Larger spans are laid down first and nested ones overwrite them.
    """
    owner: list[Node | None] = [None] * (n_lines + 1)
    for node in sorted(nodes, key=lambda n: n.span.start_line - n.span.end_line):
        last = min(node.span.end_line, n_lines)
        owner[node.span.start_line : last + 1] = [node] * max(0, last - node.span.start_line + 1)
    owned: dict[Node, list[int]] = {}
    for number in range(1, n_lines + 1):
        holder = owner[number]
        if holder is not None:
            owned.setdefault(holder, []).append(number)
    return owned


def _read_file(
    top: str, rel: str, known_key: str, pm: pluggy.PluginManager, settings: Settings
) -> _Outcome:
    """Read, key and (unless its key is ``known_key``) parse one file."""
    try:
        data = read_regular_file(top + rel, settings.max_file_bytes)
    except NotRegularFile as refused:
        # Listed as a file, replaced since (by a FIFO, a folder, a link).
        return _Outcome("", "refused", str(refused))
    except FileTooLarge as large:
        return _Outcome("", "too_large", _too_large(large.size, settings))
    except OSError as err:
        return _Outcome("", "unreadable", _reason(err))
    key = hashlib.sha256(data + rel.encode("utf-8")).hexdigest()
    if key == known_key:
        return _Outcome(key, "ok")  # the bytes the row was made from: nothing to parse
    return _parse(rel, data, key, pm, settings)


def _parse(
    rel: str, data: bytes, key: str, pm: pluggy.PluginManager, settings: Settings
) -> _Outcome:
    if b"\0" in data:
        return _Outcome(key, "binary", "contains a NUL byte")
    try:
        text = source_text(data)
    except UnicodeDecodeError as err:
        return _Outcome(key, "not_utf8", f"invalid UTF-8 at byte {err.start}")
    try:
        parsed: ParsedFile | None = pm.hook.parse_file(path=rel, text=text, settings=settings)
    except TooComplex as err:
        return _Outcome(key, "too_complex", str(err))
    except SyntaxError as err:
        return _Outcome(key, "syntax_error", f"line {err.lineno}: {err.msg}")
    if parsed is None:
        return _Outcome(key, "no_parser", "no enabled plugin parses this file")
    status, message = "ok", ""
    if parsed.error_lines:
        status = "partial"
        where = ", ".join(map(str, parsed.error_lines))
        message = f"indexed around code that does not parse at line(s) {where}"
    lines = split_lines(text)
    derived = pm.hook.node_values(path=rel, lines=lines, parsed=parsed, settings=settings)
    return _Outcome(key, status, message, _rows(parsed, lines, derived))


def _rows(
    parsed: ParsedFile, lines: tuple[str, ...], derived: list[list[NodeValues]]
) -> _Rows:
    owned = _lines_by_innermost(parsed.nodes, len(lines))
    nodes, terms = [], []
    by_qualname: dict[str, list[tuple[int, int, int]]] = {}
    for at, node in enumerate(parsed.nodes):
        start, end = node.span.start_line, node.span.end_line
        by_qualname.setdefault(node.qualname, []).append((end - start, start, at))
        nodes.append((node.qualname, node.name, node.kind, start, end, node.header_end,
                      node.signature, node.docstring))
        description = "" if node.kind == "module" else f"{node.signature} {node.docstring}"
        code = "\n".join(lines[n - 1] for n in owned.get(node, ()))
        terms.append((" ".join(tokenize(description)), " ".join(tokenize(code))))
    edges = []
    for edge in parsed.edges:
        same_name = by_qualname.get(edge.source)
        if not same_name:
            continue
        # Definitions sharing a qualname are told apart by which one holds the line.
        holding = [c for c in same_name if c[1] <= edge.line <= c[1] + c[0]]
        edges.append((min(holding or same_name)[2], edge.kind, edge.target,
                      edge.target.rsplit(".", 1)[-1], edge.line))
    values = tuple(
        (at, found.key, value)
        for per_plugin in derived for found in per_plugin
        for at, value in enumerate(found.values) if value is not None
    )
    return _Rows(parsed.language, json.dumps(parsed.multiline_statements), tuple(nodes),
                 tuple(terms), tuple(edges), values)


def _outcomes(
    top: str, jobs: list[tuple[str, str]], pm: pluggy.PluginManager, settings: Settings
) -> Generator[_Outcome, None, None]:
    """:func:`_read_file` of each (path, known key), in order: in worker processes
    when there are enough files to be worth starting them, else here.

    Workers are forked, so they parse with this very plugin manager (plugins
    registered in-process included), and share nothing else with this process
    (:mod:`ctx04_core.index.workers`). At most two windows of files are in
    flight, so a writer slower than the workers never holds every result.
    """
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if len(jobs) < PARALLEL_MIN_FILES or workers < 2 or not _FORK:
        for rel, known_key in jobs:
            yield _read_file(top, rel, known_key, pm, settings)
        return
    with forked_pool(workers, _adopt, (top, pm, settings)) as pool:
        pending: Iterator[_Outcome] = iter(())
        for start in range(0, len(jobs), PARALLEL_WINDOW):
            # Chunked here, not by imap: only an unchunked imap's answers can be
            # awaited with a deadline.
            chunks = [jobs[at : at + PARALLEL_CHUNK]
                      for at in range(start, min(start + PARALLEL_WINDOW, len(jobs)),
                                      PARALLEL_CHUNK)]
            ahead = _in_time(pool.imap(_read_forked, chunks))
            yield from pending
            pending = ahead
        yield from pending


def _in_time(answers: IMapIterator[list[_Outcome]]) -> Iterator[_Outcome]:
    """The workers' answers, each chunk's within ``WORKER_ANSWER_TIMEOUT_S``."""
    while True:
        try:
            yield from answers.next(WORKER_ANSWER_TIMEOUT_S)
        except StopIteration:
            return
        except multiprocessing.TimeoutError:
            raise IndexUnavailable(
                f"a parse worker gave no answer within {WORKER_ANSWER_TIMEOUT_S:g} s; "
                "the refresh was stopped"
            ) from None


def _adopt(top: str, pm: pluggy.PluginManager, settings: Settings) -> None:
    """In a new worker: keep what the refresh parses with (each refresh forks its own)."""
    global _forked
    _forked = (top, pm, settings)


def _read_forked(chunk: list[tuple[str, str]]) -> list[_Outcome]:
    assert _forked is not None
    top, pm, settings = _forked
    return [_read_file(top, rel, known_key, pm, settings) for rel, known_key in chunk]


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


def _too_large(size: int, settings: Settings) -> str:
    return f"{size} bytes, over the {settings.max_file_bytes} limit"


def _reason(err: OSError) -> str:
    return err.strerror or str(err)
