"""Querying the index: the read methods the stages call, on an open connection.

Which names are defined, where a name is defined, what a file and a
definition contain and refer to, which definitions a description or a
piece of code matches. Reads need no lock: SQLite's WAL lets them run
beside a writer. What the stages ask for again and again is kept here,
bounded, until the next refresh.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ctx04_core.index.statuses import OK, PARTIAL
from ctx04_core.text import dotted, tokenize
from ctx04_core.types import MODULE, Diagnostic, Edge, Node, Span

# The files whose nodes are in the index: parsed whole, or around errors.
_PARSED = f"status IN ('{OK}', '{PARTIAL}')"
MAX_QUERY_TOKENS = 64
# Files whose nodes an open index keeps, least recently asked for dropped
# first: one retrieval on django or sympy asks for 27 to 230 files' nodes, and a
# long-lived process (``ctx04 mcp``) must not grow with every new file asked.
FILE_NODES_CACHED = 256
# Document counts (per search table and term) an open index keeps: the
# bounded searches and the re-rank ask about the same few dozen words, and a
# count costs a pass over the term's posting list. A long-lived process
# (``ctx04 mcp``, refreshed only when a file changed) starts afresh past this.
DOCUMENT_COUNTS_CACHED = 4096

_NODE_COLUMNS = (
    "f.path, n.qualname, n.name, n.kind, n.start_line, n.end_line, "
    "n.header_end, n.signature, n.docstring"
)


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
        self._respelled: dict[str, str | None] = {}

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or (self._lower and name != name.lower()):
            return False
        found = self._known.get(name)
        if found is None:
            found = self._conn.execute(self._sql, (name,)).fetchone() is not None
            self._known[name] = found
        return found

    def respelled(self, name: str) -> str | None:
        """The one name defined here that is ``name`` but for its letters' case
        after the first (``JsonField`` is ``JSONField``), if there is one. A
        different first letter is another thing: ``compilationUnit`` is a
        variable of type ``CompilationUnit``. Asked once per name, as ``in`` is:
        a query asks it at each mention of the name."""
        if name not in self._respelled:
            rows = self._conn.execute(
                "SELECT DISTINCT name FROM nodes WHERE name = ? COLLATE NOCASE "
                "AND kind != 'module' LIMIT 2", (name,),
            ).fetchall()
            one = len(rows) == 1 and rows[0][0][:1] == name[:1]
            self._respelled[name] = str(rows[0][0]) if one else None
        return self._respelled[name]


class IndexQueries:
    """The questions the stages ask of the index, answered from ``conn``."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._names: frozenset[str] | None = None
        self._paths: frozenset[str] | None = None
        # Stages ask for the same few files' nodes hundreds of times a retrieval.
        self._file_nodes: OrderedDict[str, tuple[Node, ...]] = OrderedDict()
        self._file_contains: OrderedDict[str, _Contains] = OrderedDict()
        self._nodes_counted: int | None = None
        self._vocabularies: set[str] = set()  # the search tables whose fts5vocab view exists
        self._document_counts: dict[tuple[str, str], int] = {}

    def _forget(self) -> None:
        """Drop what was kept of the rows read so far: a refresh is about to change them."""
        self._names = self._paths = self._nodes_counted = None
        self._file_nodes.clear()
        self._file_contains.clear()
        self._document_counts.clear()

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

    def innermost(self, path: str, line: int, last_line: int | None = None) -> Node | None:
        """The smallest definition containing ``line``, else the module, else None.

        With ``last_line``, the smallest holding at least half of the lines
        ``line`` to ``last_line`` (None when not even the module does: the
        lines are mostly past the file's end): a link to lines of a file
        often starts at the comment above the definition it shows, which lies
        in the container."""
        last = line if last_line is None else max(line, last_line)
        needed = (last - line + 2) // 2
        holding = [
            n for n in self.file_nodes(path)
            if min(last, n.span.end_line) - max(line, n.span.start_line) + 1 >= needed
        ]
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

    def multiline_statements(self, path: str) -> tuple[tuple[int, int], ...]:
        """Spans of the file's statements that cover several lines (headers only
        for compound statements); empty for a file that is not indexed or not parsed."""
        row = self._conn.execute("SELECT statements FROM files WHERE path = ?", (path,)).fetchone()
        if row is None:
            return ()
        return tuple((start, end) for start, end in json.loads(row[0]))

    def languages(self) -> list[tuple[str, int]]:
        """(language, number of files) of the parsed files, most files first."""
        return parsed_languages(self._conn)

    def failures(self) -> list[tuple[str, str, str]]:
        """(path, status, message) of every indexed file that did not parse, or only in part."""
        return failed_files(self._conn)

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


def parsed_languages(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """See :meth:`IndexQueries.languages`."""
    rows = conn.execute(
        f"SELECT language, count(*) AS n FROM files WHERE {_PARSED} "
        "GROUP BY language ORDER BY n DESC, language"
    )
    return [(language, count) for language, count in rows]


def failed_files(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """See :meth:`IndexQueries.failures`."""
    rows = conn.execute(
        "SELECT path, status, message FROM files WHERE status != ? ORDER BY path", (OK,)
    )
    return [(path, status, message) for path, status, message in rows]


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


def _innermost_first(node: Node) -> tuple[int, bool, int]:
    return (node.span.end_line - node.span.start_line, node.kind == MODULE, -node.span.start_line)


def _node(row: Sequence[Any]) -> Node:
    path, qualname, name, kind, start, end, header_end, signature, docstring = row
    return Node(qualname, name, kind, Span(path, start, end), header_end, signature, docstring)
