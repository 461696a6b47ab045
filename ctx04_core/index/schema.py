"""The SQLite layout of the code index, and opening a file safely.

A file whose schema version differs is emptied and rebuilt; a file SQLite
cannot read is moved aside and rebuilt, so a broken cache never stops a
retrieval.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

# Bump when the layout changes or the built-in parser extracts something new:
# every index built before is then rebuilt from scratch.
SCHEMA_VERSION = "4"

# api_index is the spec §4 table; code_fts holds each node's own code (its
# span less nested definitions), tokenized alike; api_fts holds each row's description
# already split by ctx04_core.text.tokenize, so FTS5 only has to split on
# spaces ("_" kept so identifiers stay whole) and every scorer sees one
# vocabulary. Edges are found by the last dotted component of their target,
# which serves exact and suffix matches with one index. A query asks whether
# its words name a definition, in any case (nodes_name_nocase), one by one.
DDL = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    key TEXT NOT NULL,
    size INTEGER NOT NULL,
    stat TEXT NOT NULL,
    language TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    statements TEXT NOT NULL
);
CREATE TABLE nodes(
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL,
    qualname TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    header_end INTEGER NOT NULL,
    signature TEXT NOT NULL,
    docstring TEXT NOT NULL
);
CREATE INDEX nodes_name ON nodes(name);
CREATE INDEX nodes_name_nocase ON nodes(name COLLATE NOCASE);
CREATE INDEX nodes_qualname ON nodes(qualname);
CREATE INDEX nodes_file ON nodes(file_id, start_line);
CREATE TABLE edges(
    src_node_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    target_name TEXT NOT NULL,
    line INTEGER NOT NULL
);
CREATE INDEX edges_target ON edges(target_name);
CREATE INDEX edges_src ON edges(src_node_id);
CREATE VIEW api_index(qualname, kind, signature, docstring, desc_text, file, line) AS
    SELECT n.qualname, n.kind, n.signature, n.docstring,
           n.signature || ' ' || n.docstring, f.path, n.start_line
    FROM nodes n JOIN files f ON f.id = n.file_id
    WHERE n.kind != 'module';
CREATE VIRTUAL TABLE api_fts USING fts5(tokens, tokenize = "unicode61 tokenchars '_'");
CREATE VIRTUAL TABLE code_fts USING fts5(tokens, tokenize = "unicode61 tokenchars '_'");
"""


# Values a plugin derives from the repository and keeps beside the index
# (the history plugin's parsed commit log, per HEAD). Created where missing,
# so adding it rebuilds no index; a schema change empties it with the rest.
DERIVED_DDL = """
CREATE TABLE IF NOT EXISTS derived(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    stored_ns INTEGER NOT NULL
)
"""


# Values a plugin derives from each node at index time (``node_values`` hook),
# under a key of the plugin's namespace. Deleted with the nodes of a file
# whose rows are rewritten; created where missing, like ``derived``. A rowid
# table: a row of a kilobyte (a vector) in a WITHOUT ROWID table spills into
# an overflow page of its own, which made django's index four times larger.
NODE_VALUES_DDL = (
    """
CREATE TABLE IF NOT EXISTS node_values(
    node_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL
)
""",
    "CREATE UNIQUE INDEX IF NOT EXISTS node_values_node ON node_values(node_id, key)",
)


def is_corruption(err: sqlite3.DatabaseError) -> bool:
    """True when SQLite says the file is not a database or is damaged."""
    # Locked, busy or a full disk leave the file itself fine.
    code = getattr(err, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def connect(path: Path) -> sqlite3.Connection:
    """An autocommit connection to an index with the current schema.

    Raises ``sqlite3.DatabaseError`` when the file cannot be read as a
    database; the caller decides what to do with it.
    """
    conn = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        # An index is a cache: losing the last commit on power loss only costs a re-parse.
        conn.execute("PRAGMA synchronous=NORMAL")
        if _version(conn) != SCHEMA_VERSION:
            _rebuild(conn)
        conn.execute(DERIVED_DDL)
        for statement in NODE_VALUES_DDL:
            conn.execute(statement)
        conn.execute("SELECT count(*) FROM files").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def move_aside(path: Path) -> Path:
    """Rename an unreadable index out of the way and drop its WAL files."""
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    path.replace(aside)
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    return aside


def _version(conn: sqlite3.Connection) -> str | None:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return str(row[0]) if row else None


def _rebuild(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'view'"
        ).fetchall():
            conn.execute(f'DROP VIEW "{name}"')
        # Dropping a virtual table drops its shadow tables, so go again until none are left.
        while True:
            row = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY sql LIKE 'CREATE VIRTUAL%' DESC"
            ).fetchone()
            if row is None:
                break
            conn.execute(f'DROP TABLE "{row[0]}"')
        for statement in DDL.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
