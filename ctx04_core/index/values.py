"""What plugins keep in the index beside the parsed rows, and read back.

Values a plugin derives from the whole repository (``derived``: the history
plugin's commit log per HEAD) and values per node (``node_values``: from the
``node_values`` hook at index time, or stored later by a plugin), each under
a key of the plugin's namespace.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from ctx04_core.index.opening import abandon, begin
from ctx04_core.types import Node

# Derived values (a commit log per HEAD) kept in an index at most: a few
# checkouts' worth, so switching branches does not grow the file without end.
DERIVED_ENTRIES = 8


class StoredValues:
    """Reading and writing plugins' values, on the index's connection ``_conn``."""

    _conn: sqlite3.Connection

    def derived(self, key: str) -> str | None:
        """A value a plugin stored with :meth:`store_derived`, or None."""
        row = self._conn.execute("SELECT value FROM derived WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def store_derived(self, key: str, value: str, keep: int = DERIVED_ENTRIES) -> None:
        """Keep ``value`` under ``key``; of the keys in its namespace (the text before
        the first ``:``), only the newest ``keep`` values stay, so one plugin's
        many small entries never push out another's few large ones."""
        namespace = key.partition(":")[0] + ":%"
        begin(self._conn)
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
            abandon(self._conn)
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
        begin(self._conn)
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
            abandon(self._conn)
            raise
