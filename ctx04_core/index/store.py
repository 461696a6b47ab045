"""The code index of one repository: a SQLite file in the user's cache, kept per file.

Each file's row carries its size, mtime and key ``sha256(bytes + path)``; a
refresh re-reads a file only when its size or mtime changed and re-parses it
only when its key changed (or the enabled parsers did). A file that cannot be
parsed keeps a row with its status and no nodes, so it is not retried until
it changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import multiprocessing
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Container, Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.pool import IMapIterator
from pathlib import Path
from typing import Any, TypeVar

import platformdirs
import pluggy

from ctx04_core import ripgrep
from ctx04_core.index import schema
from ctx04_core.index.workers import forked_pool, not_inherited
from ctx04_core.parse_budget import TooComplex
from ctx04_core.paths import nameable
from ctx04_core.regular_file import FileTooLarge, NotRegularFile, read_regular_file
from ctx04_core.settings import Settings
from ctx04_core.text import dotted, source_text, split_lines, tokenize
from ctx04_core.types import Diagnostic, Edge, Node, NodeValues, ParsedFile, Span

DB_NAME = "index.sqlite3"
# The files whose nodes are in the index: parsed whole, or around errors.
_PARSED = "status IN ('ok', 'partial')"
LOCK_TIMEOUT_S = 60.0
MAX_QUERY_TOKENS = 64
# Rows are flushed to SQLite every this many files, inside the one transaction.
BATCH_FILES = 256
# Files whose nodes an open index keeps, least recently asked for dropped
# first: one retrieval on django or sympy asks for 27 to 230 files' nodes, and a
# long-lived process (``ctx04 mcp``) must not grow with every new file asked.
FILE_NODES_CACHED = 256
# Document counts (per search table and term) an open index keeps: the
# bounded searches and the re-rank ask about the same few dozen words, and a
# count costs a pass over the term's posting list. A long-lived process
# (``ctx04 mcp``, refreshed only when a file changed) starts afresh past this.
DOCUMENT_COUNTS_CACHED = 4096
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

_NODE_COLUMNS = (
    "f.path, n.qualname, n.name, n.kind, n.start_line, n.end_line, "
    "n.header_end, n.signature, n.docstring"
)


# Derived values (a commit log per HEAD) kept in an index at most: a few
# checkouts' worth, so switching branches does not grow the file without end.
DERIVED_ENTRIES = 8


class IndexUnavailable(Exception):
    """The index cannot be opened or written; the message is one clear line."""


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
class Matches:
    """What a search of the index found, best first, and the query terms it left out."""

    found: tuple[tuple[Node, float], ...]  # each with FTS5's BM25 negated: higher is better
    # The most common terms, past ``Settings.search_postings_budget``, in query order.
    left_out: tuple[str, ...] = ()

    def omission(self, source: str) -> tuple[Diagnostic, ...]:
        """The ``omitted`` diagnostic of the terms left out, for a recall named ``source``."""
        if not self.left_out:
            return ()
        return (Diagnostic(
            "omitted", f"{source} terms budget",
            detail=f"{len(self.left_out)} common terms not searched: "
            f"{', '.join(map(repr, self.left_out))}",
        ),)


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


class DefinedNames(Container[str]):
    """Whether a name is the simple name of a function, method or class, asked of the
    index when asked here: a query asks about a few dozen words, and the whole set
    of a 50,000-file repository took longer to read than the rest of the query.

    With ``lower``, whether the name is one of those names lower-cased (a name
    not in lower case is not); the index folds ASCII letters only, which is
    what the query's terms are made of (``ctx04_core.text.tokenize``).
    """

    def __init__(self, conn: sqlite3.Connection, lower: bool) -> None:
        self._conn = conn
        self._lower = lower
        collate = " COLLATE NOCASE" if lower else ""
        self._sql = f"SELECT 1 FROM nodes WHERE name{collate} = ? AND kind != 'module' LIMIT 1"
        self._known: dict[str, bool] = {}

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or (self._lower and name != name.lower()):
            return False
        found = self._known.get(name)
        if found is None:
            found = self._conn.execute(self._sql, (name,)).fetchone() is not None
            self._known[name] = found
        return found


class CodeIndex:
    """Definitions, references and descriptions of one repository's source files.

    Reads need no lock (SQLite's WAL lets them run beside a writer); opening
    and :meth:`refresh` hold an exclusive lock on a file beside the database,
    so concurrent processes take turns and the later one finds the earlier
    one's work.
    """

    def __init__(self, root: Path, path: Path, conn: sqlite3.Connection, recovered: str | None):
        self.root = root
        self.path = path
        self.recovered = recovered  # one line when an unreadable index was replaced
        self._conn = conn
        self._names: frozenset[str] | None = None
        self._paths: frozenset[str] | None = None
        # Stages ask for the same few files' nodes hundreds of times a retrieval.
        self._file_nodes: OrderedDict[str, tuple[Node, ...]] = OrderedDict()
        self._file_contains: OrderedDict[str, _Contains] = OrderedDict()
        self._nodes_counted: int | None = None
        self._vocabularies: set[str] = set()  # the search tables whose fts5vocab view exists
        self._document_counts: dict[tuple[str, str], int] = {}

    @staticmethod
    def location(root: Path, index_dir: Path | None = None) -> Path:
        """The index file of the repository at ``root``."""
        root = root.resolve()
        if index_dir is None:
            digest = hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16]
            index_dir = platformdirs.user_cache_path("ctx04") / f"{digest}-{root.name}"
        return index_dir / DB_NAME

    @classmethod
    def discard(cls, root: Path, index_dir: Path | None, err: Exception) -> str:
        """Move a damaged index aside, so the next open builds a new one; says what was done."""
        path = cls.location(root, index_dir)
        with _exclusive(path, root.resolve()):
            return _moved_aside(path, err)

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
        path = cls.location(root, index_dir)
        index_dir = path.parent
        try:
            index_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise IndexUnavailable(f"cannot create the index folder {index_dir}: {err}") from err
        with _exclusive(path, root):
            conn, recovered = _connect_or_recover(path)
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
        try:
            # The walk for refused sources runs while rg lists the files: each
            # takes a few tenths of a second on 50,000 files, on its own core.
            with ThreadPoolExecutor(1, thread_name_prefix="ctx04-refused") as walker:
                walking = walker.submit(
                    ripgrep.refused_sources, self.root, globs, settings.exclude_globs
                )
                listed = ripgrep.list_files(
                    self.root, globs, settings.exclude_globs, settings.search_timeout_s
                )
                refused = walking.result()
        except ripgrep.SearchUnavailable as err:
            raise IndexUnavailable(str(err)) from err
        # A file name that is not UTF-8 cannot be stored, nor named to a model.
        paths = [rel for rel in listed if nameable(rel)]
        refused = {rel: why for rel, why in refused.items() if nameable(rel)}
        self._names = self._paths = self._nodes_counted = None
        self._file_nodes.clear()
        self._file_contains.clear()
        self._document_counts.clear()
        with _exclusive(self.path, self.root):
            try:
                counts = self._refresh(pm, paths, refused, settings, progress)
            except sqlite3.DatabaseError as err:
                if not schema.is_corruption(err):
                    raise IndexUnavailable(f"cannot write the index {self.path}: {err}") from err
                self._conn.close()
                self._conn, self.recovered = _recover(self.path, err)
                counts = self._refresh(pm, paths, refused, settings, progress)
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

    def _refresh(
        self,
        pm: pluggy.PluginManager,
        paths: list[str],
        refused: dict[str, str],
        settings: Settings,
        progress: Callable[[int, int], None] | None,
    ) -> tuple[int, int, int, _Summary]:
        conn = self._conn
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
        top = f"{self.root}{os.sep}"
        # Taken before any file is read, so a file read later is never
        # wrongly taken as settled (see RACY_NS).
        now = time.time_ns()
        _begin(conn)
        try:
            reads: list[_Read] = []
            for rel in paths:
                change = self._changed(writer, top, rel, ids.get(rel), standing.get(rel),
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
                        _lock_path(self.path).touch()
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
            summary = self._summary(written=bool(parsed or gone or refused))
            conn.execute("COMMIT")
        except BaseException:
            _abandon(conn)
            raise
        return parsed, unchanged, len(gone), summary

    def _summary(self, written: bool) -> _Summary:
        """The counts and lists a refresh reports, counted again only after a write.

        Counting 2 million edges and grouping 50,000 files took a third of a
        nothing-changed refresh; the index keeps the last counts beside the
        rows they count, written in the same transaction. ctx04 before this
        rewrote the 'parsers' row of meta on every refresh and never the
        counts, and a rewritten row takes a rowid above every other: counts
        older than the 'parsers' row may be stale and are counted again.
        """
        kept = {key: (rowid, value) for key, rowid, value in self._conn.execute(
            "SELECT key, rowid, value FROM meta WHERE key IN ('parsers', 'summary')"
        )}
        if not written and "summary" in kept and kept["summary"][0] > kept["parsers"][0]:
            nodes, edges, failures, languages = json.loads(kept["summary"][1])
            return _Summary(nodes, edges, tuple(map(tuple, failures)),
                            tuple(map(tuple, languages)))
        nodes, edges = self._conn.execute(
            "SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM edges)"
        ).fetchone()
        summary = _Summary(nodes, edges, tuple(self.failures()), tuple(self.languages()))
        self._conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('summary', ?)",
            (json.dumps([nodes, edges, summary.failures, summary.languages]),),
        )
        return summary

    def _changed(
        self,
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
            (known_key,) = self._conn.execute(
                "SELECT key FROM files WHERE path = ?", (rel,)
            ).fetchone()
        settled = "" if now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS else stat
        return _Read(rel, file_id, known_key, st.st_size, stat, settled)

    def names(self) -> frozenset[str]:
        """Every simple name a function, method or class is defined under."""
        if self._names is None:
            rows = self._conn.execute("SELECT DISTINCT name FROM nodes WHERE kind != 'module'")
            self._names = frozenset(row[0] for row in rows)
        return self._names

    def defined(self, *, lower: bool = False) -> DefinedNames:
        """The names of :meth:`names` (or, with ``lower``, those names lower-cased)
        as a container that asks the index name by name."""
        return DefinedNames(self._conn, lower)

    def paths(self) -> frozenset[str]:
        """The repo-relative paths of every indexed file that parsed."""
        if self._paths is None:
            rows = self._conn.execute(f"SELECT path FROM files WHERE {_PARSED}")
            self._paths = frozenset(row[0] for row in rows)
        return self._paths

    def lookup(self, name: str) -> list[Node]:
        """Nodes named ``name``, or whose qualname is or ends with a qualified ``name``
        (``a.b``, or another language's ``a::b``, ``a->b``, ``A\\B``, ``A#b``)."""
        name = dotted(name)
        last = name.rsplit(".", 1)[-1]
        if "." not in name:
            return self._nodes("n.name = ?", (name,))
        return self._nodes(
            "n.name = ? AND (n.qualname = ? OR substr(n.qualname, -?) = ?)",
            (last, name, len(name) + 1, "." + name),
        )

    def file_nodes(self, path: str) -> list[Node]:
        """Every node of the file, module first, then by start line, outer before inner."""
        nodes: tuple[Node, ...] = _recent(
            self._file_nodes, path, lambda: tuple(self._nodes("f.path = ?", (path,)))
        )
        return list(nodes)

    def innermost(self, path: str, line: int) -> Node | None:
        """The smallest definition containing ``line``, else the module, else None."""
        holding = [n for n in self.file_nodes(path) if n.span.start_line <= line <= n.span.end_line]
        return min(holding, key=_innermost_first, default=None)

    def children(self, node: Node) -> list[Node]:
        """The definitions directly inside ``node``, in file order."""
        path = node.span.path
        contains = _recent(self._file_contains, path, lambda: self._contains(path))
        inside = contains.get((node.qualname, node.span.start_line))
        if not inside:
            return []
        return [n for n in self.file_nodes(path) if (n.qualname, n.span.start_line) in inside]

    def _contains(self, path: str) -> _Contains:
        # One query per file instead of one per container: a retrieval asks
        # for the children of about 200 containers, most in the same few files.
        rows = self._conn.execute(
            "SELECT n.qualname, n.start_line, e.target, e.line FROM edges e "
            "JOIN nodes n ON n.id = e.src_node_id JOIN files f ON f.id = n.file_id "
            "WHERE f.path = ? AND e.kind = 'contain'",
            (path,),
        )
        contains: dict[tuple[str, int], set[tuple[str, int]]] = {}
        for qualname, start, target, line in rows:
            contains.setdefault((qualname, start), set()).add((target, line))
        return {key: frozenset(inside) for key, inside in contains.items()}

    def edges_from(self, node: Node) -> list[Edge]:
        """The references out of ``node``, by line."""
        node_id = self._node_id(node)
        if node_id is None:
            return []
        rows = self._conn.execute(
            "SELECT kind, target, line FROM edges WHERE src_node_id = ? "
            "ORDER BY line, kind, target",
            (node_id,),
        )
        return [Edge(node.qualname, kind, target, line) for kind, target, line in rows]

    def references_to(self, name: str) -> list[Edge]:
        """Invoke and import edges whose target is ``name`` or ends with ``.name``."""
        rows = self._conn.execute(
            "SELECT n.qualname, e.kind, e.target, e.line FROM edges e "
            "JOIN nodes n ON n.id = e.src_node_id JOIN files f ON f.id = n.file_id "
            "WHERE e.target_name = ? AND e.kind IN ('invoke', 'import') "
            "AND (e.target = ? OR substr(e.target, -?) = ?) "
            "ORDER BY f.path, e.line, e.kind, e.target",
            (name.rsplit(".", 1)[-1], name, len(name) + 1, "." + name),
        )
        return [Edge(*row) for row in rows]

    def search_descriptions(self, text: str, limit: int, postings: int) -> Matches:
        """Definitions whose signature and docstring best match ``text``, best first,
        searched for its rarest terms within ``postings`` (see :meth:`_searched_terms`)."""
        return self._search("api_fts", tokenize(text), limit, postings)

    def search_code(self, terms: list[str], limit: int, postings: int) -> Matches:
        """Definitions whose own code (span less nested definitions) best matches
        ``terms`` (already tokenized), best first, searched like :meth:`search_descriptions`."""
        return self._search("code_fts", terms, limit, postings)

    def term_statistics(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """How many definitions there are, and in how many one's own code each term occurs
        (terms in none are left out).

        Read from the code search's own posting lists, so the numbers are those
        of the whole repository, not of whatever a query happened to recall.
        """
        if self._nodes_counted is None:
            (self._nodes_counted,) = self._conn.execute("SELECT count(*) FROM nodes").fetchone()
        counts = self._counts("code_fts", terms)
        return self._nodes_counted, {term: n for term, n in counts.items() if n}

    def _counts(self, table: str, terms: list[str]) -> dict[str, int]:
        """In how many rows of search ``table`` each of ``terms`` occurs (0 for none)."""
        if table not in self._vocabularies:
            self._conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_vocab "
                f"USING fts5vocab(main, {table}, 'row')"
            )
            self._vocabularies.add(table)
        cached = self._document_counts
        wanted = [t for t in dict.fromkeys(terms) if (table, t) not in cached]
        if len(cached) + len(wanted) > DOCUMENT_COUNTS_CACHED:
            cached.clear()
            wanted = list(dict.fromkeys(terms))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self._conn.execute(
                f"SELECT term, doc FROM temp.{table}_vocab WHERE term IN ({marks})", chunk
            )
            cached.update(((table, t), 0) for t in chunk)
            cached.update(((table, term), doc) for term, doc in rows)
        return {t: cached[table, t] for t in terms}

    def _searched_terms(
        self, table: str, terms: list[str], postings: int
    ) -> tuple[list[str], tuple[str, ...]]:
        """The terms to search and those left out, each in query order.

        FTS5 scores every row that holds any searched term, so the work is the
        sum of the terms' document counts. The rarest terms are kept while that
        sum stays within ``postings`` (the rarest one always); the rest are the
        most common, whose BM25 weight is the least.
        """
        counts = self._counts(table, terms)
        kept: set[str] = set()
        total = 0
        for term in sorted(terms, key=counts.__getitem__):
            if kept and total + counts[term] > postings:
                break
            kept.add(term)
            total += counts[term]
        return [t for t in terms if t in kept], tuple(t for t in terms if t not in kept)

    def _search(self, table: str, terms: list[str], limit: int, postings: int) -> Matches:
        terms = list(dict.fromkeys(terms))[:MAX_QUERY_TOKENS]
        if not terms or limit <= 0:
            return Matches(())
        searched, left_out = self._searched_terms(table, terms, postings)
        match = " OR ".join(f'"{term}"' for term in searched)
        rows = self._conn.execute(
            f"SELECT {_NODE_COLUMNS}, bm25({table}) AS score FROM {table} "
            f"JOIN nodes n ON n.id = {table}.rowid JOIN files f ON f.id = n.file_id "
            f"WHERE {table} MATCH ? ORDER BY score, {table}.rowid LIMIT ?",
            (match, limit),
        )
        return Matches(tuple((_node(row[:-1]), -row[-1]) for row in rows), left_out)

    def derived(self, key: str) -> str | None:
        """A value a plugin stored with :meth:`store_derived`, or None."""
        row = self._conn.execute("SELECT value FROM derived WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def store_derived(self, key: str, value: str, keep: int = DERIVED_ENTRIES) -> None:
        """Keep ``value`` under ``key``; of the keys in its namespace (the text before
        the first ``:``), only the newest ``keep`` values stay, so one plugin's
        many small entries never push out another's few large ones."""
        namespace = key.partition(":")[0] + ":%"
        _begin(self._conn)
        try:
            self._conn.execute(
                "INSERT OR REPLACE INTO derived(key, value, stored_ns) VALUES (?, ?, ?)",
                (key, value, time.time_ns()),
            )
            self._conn.execute(
                "DELETE FROM derived WHERE key LIKE ?1 AND key NOT IN "
                "(SELECT key FROM derived WHERE key LIKE ?1 ORDER BY stored_ns DESC LIMIT ?2)",
                (namespace, keep),
            )
            self._conn.execute("COMMIT")
        except BaseException:
            _abandon(self._conn)
            raise

    def node_values(self, key: str, nodes: Sequence[Node]) -> list[bytes | None]:
        """The value stored under ``key`` for each node (by the ``node_values`` hook
        or :meth:`store_node_values`), None where there is none."""
        starts: dict[str, set[int]] = {}
        for node in nodes:
            starts.setdefault(node.span.path, set()).add(node.span.start_line)
        stored: dict[tuple[str, str, int], bytes] = {}
        for path, lines in starts.items():
            # Only the asked-for nodes' values: a large file holds hundreds.
            marks = ", ".join("?" * len(lines))
            rows = self._conn.execute(
                "SELECT n.qualname, n.start_line, v.value FROM files f "
                "JOIN nodes n ON n.file_id = f.id "
                "JOIN node_values v ON v.node_id = n.id AND v.key = ? "
                f"WHERE f.path = ? AND n.start_line IN ({marks})",
                (key, path, *sorted(lines)),
            )
            stored.update(((path, qualname, start), value) for qualname, start, value in rows)
        return [stored.get((n.span.path, n.qualname, n.span.start_line)) for n in nodes]

    def store_node_values(self, key: str, values: Sequence[tuple[Node, bytes]]) -> None:
        """Keep each value under ``key`` with its node, replacing what was there;
        a node no longer in the index is passed over."""
        by_path: dict[str, list[tuple[Node, bytes]]] = {}
        for node, value in values:
            by_path.setdefault(node.span.path, []).append((node, value))
        if not by_path:
            return
        _begin(self._conn)
        try:
            # Ids are looked up inside the write, so a refresh by another
            # process cannot renumber the nodes in between.
            for path, pairs in by_path.items():
                ids = {
                    (qualname, start): node_id
                    for node_id, qualname, start in self._conn.execute(
                        "SELECT n.id, n.qualname, n.start_line FROM files f "
                        "JOIN nodes n ON n.file_id = f.id WHERE f.path = ?",
                        (path,),
                    )
                }
                self._conn.executemany(
                    "INSERT OR REPLACE INTO node_values VALUES (?, ?, ?)",
                    [
                        (ids[n.qualname, n.span.start_line], key, value) for n, value in pairs
                        if (n.qualname, n.span.start_line) in ids
                    ],
                )
            self._conn.execute("COMMIT")
        except BaseException:
            _abandon(self._conn)
            raise

    def multiline_statements(self, path: str) -> tuple[tuple[int, int], ...]:
        """Spans of the file's statements that cover several lines (headers only
        for compound statements); empty for a file that is not indexed or not parsed."""
        row = self._conn.execute("SELECT statements FROM files WHERE path = ?", (path,)).fetchone()
        if row is None:
            return ()
        return tuple((start, end) for start, end in json.loads(row[0]))

    def languages(self) -> list[tuple[str, int]]:
        """(language, number of files) of the parsed files, most files first."""
        rows = self._conn.execute(
            f"SELECT language, count(*) AS n FROM files WHERE {_PARSED} "
            "GROUP BY language ORDER BY n DESC, language"
        )
        return [(language, count) for language, count in rows]

    def failures(self) -> list[tuple[str, str, str]]:
        """(path, status, message) of every indexed file that did not parse, or only in part."""
        rows = self._conn.execute(
            "SELECT path, status, message FROM files WHERE status != 'ok' ORDER BY path"
        )
        return [(path, status, message) for path, status, message in rows]

    def _nodes(self, where: str, params: Sequence[Any]) -> list[Node]:
        rows = self._conn.execute(
            f"SELECT {_NODE_COLUMNS} FROM nodes n JOIN files f ON f.id = n.file_id "
            f"WHERE {where} ORDER BY f.path, n.start_line, n.end_line DESC, "
            "n.kind != 'module', n.id",
            params,
        )
        return [_node(row) for row in rows]

    def _node_id(self, node: Node) -> int | None:
        # A qualname can repeat in a file (a property's getter and setter); with
        # the start line it cannot, and the module has a qualname of its own.
        row = self._conn.execute(
            "SELECT n.id FROM nodes n JOIN files f ON f.id = n.file_id "
            "WHERE f.path = ? AND n.qualname = ? AND n.start_line = ?",
            (node.span.path, node.qualname, node.span.start_line),
        ).fetchone()
        return int(row[0]) if row else None


# Per definition of a file, by (qualname, start line): the (qualname, start
# line) of each definition directly inside it.
_Contains = dict[tuple[str, int], frozenset[tuple[str, int]]]
_Cached = TypeVar("_Cached")


def _recent(cache: OrderedDict[str, _Cached], key: str, load: Callable[[], _Cached]) -> _Cached:
    """``cache[key]``, loaded when missing; past ``FILE_NODES_CACHED`` entries the
    least recently asked for is dropped."""
    value = cache.get(key)
    if value is None:
        value = cache[key] = load()
        if len(cache) > FILE_NODES_CACHED:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return value


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


# A file changed within this long of being read may change again without
# its stat showing it (a coarse clock, an edit in the same tick): git calls
# it "racily clean". Its row keeps no stat, so the next refresh hashes it.
RACY_NS = 2_000_000_000
# Marks the stat of a row made without reading the file (see CodeIndex._changed).
_UNREAD = "unread:"


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _progress_mark(path: Path) -> tuple[tuple[int, int], ...]:
    """Size and mtime of the index, its WAL and the lock file (touched after each
    batch of files): they change while a builder makes progress."""
    marks = []
    for where in (path, path.with_name(path.name + "-wal"), _lock_path(path)):
        try:
            st = os.stat(where)
        except OSError:
            marks.append((-1, -1))
        else:
            marks.append((st.st_size, st.st_mtime_ns))
    return tuple(marks)


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


def _innermost_first(node: Node) -> tuple[int, bool, int]:
    return (node.span.end_line - node.span.start_line, node.kind == "module", -node.span.start_line)


def _node(row: Sequence[Any]) -> Node:
    path, qualname, name, kind, start, end, header_end, signature, docstring = row
    return Node(qualname, name, kind, Span(path, start, end), header_end, signature, docstring)


def _begin(conn: sqlite3.Connection) -> None:
    """Start a write, the WAL's committed frames first copied into the database.

    So a write that fails leaves nothing in the WAL but its own frames, which
    :func:`_abandon` can give back: a WAL that held committed frames could
    only be truncated after copying them, and on a full disk that copy fails
    too, leaving the WAL to keep the disk full.
    """
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    conn.execute("BEGIN IMMEDIATE")


def _abandon(conn: sqlite3.Connection) -> None:
    """Roll back a failed write and truncate the WAL its frames grew (a full disk's
    space back); the write's own error is the one to report."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    with suppress(sqlite3.Error):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _connect_or_recover(path: Path) -> tuple[sqlite3.Connection, str | None]:
    try:
        return schema.connect(path), None
    except sqlite3.DatabaseError as err:
        if not schema.is_corruption(err):
            raise IndexUnavailable(f"cannot open the index {path}: {err}") from err
        return _recover(path, err)


def _recover(path: Path, err: sqlite3.DatabaseError) -> tuple[sqlite3.Connection, str]:
    note = _moved_aside(path, err)
    return schema.connect(path), note


def _moved_aside(path: Path, err: Exception) -> str:
    aside = schema.move_aside(path)
    return f"the index was unreadable ({err}); moved it to {aside.name} and rebuilt it"


@contextmanager
def _exclusive(path: Path, root: Path) -> Iterator[None]:
    """Hold the index's writer lock, waiting while its holder makes progress.

    A cold build of a large repository holds the lock for minutes; a waiter
    gives up only after ``LOCK_TIMEOUT_S`` in which the index and its WAL did
    not change, i.e. when the holder is stuck, not when it is busy.
    """
    lock_path = _lock_path(path)
    try:
        handle = open(lock_path, "a+b")  # noqa: SIM115 - closed by the with below
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
