"""The code index: real git repositories, real ripgrep, real SQLite."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pluggy
import pytest
from conftest import make_git_repo

from ctx04_core.hookspecs import hookimpl
from ctx04_core.index import CodeIndex, IndexUnavailable, RefreshStats, opening, parsing, queries
from ctx04_core.index import refresh as refresh_module
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.types import Edge, Node, NodeValues, ParsedFile, Span

GLOBS = ("*.py",)
POSTINGS = Settings().search_postings_budget

STORE = '''\
"""Persistent memory."""

from pkg.util import slugify


class MemStore:
    """Keeps what the agent learned."""

    def remember(self, text):
        """Store one memory."""
        return self._write(slugify(text))

    def _write(self, value):
        return value

    class Entry:
        pass
'''

UTIL = '''\
def slugify(text):
    """Turn a title into a URL fragment."""
    return text.lower()


def qx(a, b):
    """Compute the checksum of a payment record."""
    return a ^ b


def payment_total(items):
    """Sum the amounts."""
    return sum(items)
'''

APP = '''\
from pkg import util
from pkg.store import MemStore


def main():
    store = MemStore()
    store.remember(util.slugify("Hello"))
'''


class Recorder:
    """A parser plugin that only notes which files the index asks to parse."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def parse_file(self, path: str, text: str) -> None:
        self.seen.append(path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(
        tmp_path / "repo",
        {"pkg/__init__.py": "", "pkg/store.py": STORE, "pkg/util.py": UTIL, "app.py": APP},
    )


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def pm(recorder: Recorder) -> pluggy.PluginManager:
    manager = plugin_manager(only=["python"])
    manager.register(recorder)  # registered last, so asked first; it defers to python
    return manager


@pytest.fixture
def index(repo: Path, tmp_path: Path) -> Iterator[CodeIndex]:
    opened = CodeIndex.open(repo, tmp_path / "index")
    yield opened
    opened.close()


@pytest.fixture
def built(repo: Path, tmp_path: Path, pm: pluggy.PluginManager) -> Path:
    """The file of an index of ``repo`` refreshed once and closed, for a test to damage."""
    index = CodeIndex.open(repo, tmp_path / "index")
    refresh(index, pm)
    index.close()
    return index.path


def refresh(index: CodeIndex, pm: pluggy.PluginManager, **overrides: object) -> RefreshStats:
    return index.refresh(pm, GLOBS, Settings().with_overrides(**overrides))


def rewrite(path: Path, text: str) -> None:
    """Rewrite a file as an editor would; every rewrite here also changes its size."""
    path.write_text(text, encoding="utf-8")


def test_cold_build_then_nothing_changed(
    index: CodeIndex, pm: pluggy.PluginManager, recorder: Recorder
) -> None:
    progress: list[tuple[int, int]] = []
    first = index.refresh(pm, GLOBS, Settings(), lambda done, total: progress.append((done, total)))

    assert (first.files, first.parsed, first.unchanged, first.removed) == (4, 4, 0, 0)
    assert (first.nodes, first.edges) == (12, 18)
    assert first.failures == ()
    assert recorder.seen == ["app.py", "pkg/__init__.py", "pkg/store.py", "pkg/util.py"]
    assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]

    recorder.seen.clear()
    second = refresh(index, pm)

    assert (second.files, second.parsed, second.unchanged, second.removed) == (4, 0, 4, 0)
    assert (second.nodes, second.edges) == (12, 18)
    assert recorder.seen == []


def test_only_the_changed_file_is_parsed(
    repo: Path, index: CodeIndex, pm: pluggy.PluginManager, recorder: Recorder
) -> None:
    refresh(index, pm)
    recorder.seen.clear()
    rewrite(repo / "pkg/util.py", UTIL + "\n\ndef added():\n    pass\n")

    stats = refresh(index, pm)

    assert (stats.parsed, stats.unchanged, stats.removed) == (1, 3, 0)
    assert recorder.seen == ["pkg/util.py"]
    assert [n.qualname for n in index.lookup("added")] == ["pkg.util.added"]
    # Other languages' notations for the same qualified name.
    for name in ("util.added", "pkg::util::added", "$util->added", "pkg\\util\\added"):
        assert [n.qualname for n in index.lookup(name)] == ["pkg.util.added"]


def test_new_mtime_with_the_same_content_is_not_parsed(
    repo: Path, index: CodeIndex, pm: pluggy.PluginManager, recorder: Recorder
) -> None:
    refresh(index, pm)
    recorder.seen.clear()
    target = repo / "pkg/store.py"
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))

    stats = refresh(index, pm)

    assert (stats.parsed, stats.unchanged) == (0, 4)
    assert recorder.seen == []
    assert len(index.file_nodes("pkg/store.py")) == 5


def test_a_deleted_file_is_removed_with_its_nodes(
    repo: Path, index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    refresh(index, pm)
    (repo / "pkg/util.py").unlink()

    stats = refresh(index, pm)

    assert (stats.files, stats.parsed, stats.unchanged, stats.removed) == (3, 0, 3, 1)
    assert index.file_nodes("pkg/util.py") == []
    assert index.lookup("slugify") == []
    assert "qx" not in index.names()
    assert index.search_descriptions("checksum payment", 5, POSTINGS).found == ()
    # The edges out of the deleted file are gone; the references into it stay.
    assert [(e.source, e.line) for e in index.references_to("slugify")] == [
        ("app.main", 7), ("pkg.store", 3), ("pkg.store.MemStore.remember", 11),
    ]
    with sqlite3.connect(index.path) as conn:
        assert conn.execute("SELECT count(*) FROM api_fts").fetchone() == (stats.nodes - 3,)


def test_files_that_cannot_be_parsed_are_recorded_and_not_retried(
    tmp_path: Path, pm: pluggy.PluginManager, recorder: Recorder
) -> None:
    root = make_git_repo(
        tmp_path / "repo",
        {
            "good.py": "def fine():\n    pass\n",
            "broken.py": "def f(:\n    pass\n",
            "blob.py": b"\x00\x01\x02 not text",
            "latin.py": b"name = '\xe9t\xe9'\n",
            "huge.py": "x = 1\n" * 30,
            "notes.txt": "plain text\n",
        },
    )
    index = CodeIndex.open(root, tmp_path / "index")
    try:
        stats = index.refresh(pm, ("*.py", "*.txt"), Settings(max_file_bytes=100))

        expected = [
            ("blob.py", "binary", "contains a NUL byte"),
            ("broken.py", "syntax_error", "line 1: invalid syntax"),
            ("huge.py", "too_large", "180 bytes, over the 100 limit"),
            ("latin.py", "not_utf8", "invalid UTF-8 at byte 8"),
            ("notes.txt", "no_parser", "no enabled plugin parses this file"),
        ]
        assert index.failures() == expected
        assert stats.failures == tuple(expected)
        assert (stats.files, stats.parsed, stats.nodes) == (6, 6, 2)
        assert [n.qualname for n in index.lookup("fine")] == ["good.fine"]
        assert index.file_nodes("broken.py") == []
        assert index.innermost("broken.py", 1) is None
        assert index.multiline_statements("broken.py") == ()
        # The too-large file was never read; the others were read once.
        assert recorder.seen == ["broken.py", "good.py", "notes.txt"]

        recorder.seen.clear()
        again = index.refresh(pm, ("*.py", "*.txt"), Settings(max_file_bytes=100))
        assert (again.parsed, again.unchanged) == (0, 6)
        assert recorder.seen == []
        # Nothing written: the counts the last write kept, equal to counting again.
        assert (again.nodes, again.edges, again.failures, again.languages) == (
            stats.nodes, stats.edges, tuple(index.failures()), tuple(index.languages())
        )
        assert again.languages == (("python", 1),)
    finally:
        index.close()


def test_a_fixed_file_leaves_the_failures(
    repo: Path, index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    rewrite(repo / "pkg/util.py", "def broken(:\n")
    failed = refresh(index, pm).failures
    assert failed == (("pkg/util.py", "syntax_error", "line 1: invalid syntax"),)

    rewrite(repo / "pkg/util.py", UTIL)
    stats = refresh(index, pm)

    assert stats.failures == ()
    assert stats.parsed == 1
    assert [n.qualname for n in index.lookup("qx")] == ["pkg.util.qx"]


def store_node(qualname: str, kind: str, start: int, end: int, header_end: int,
               signature: str, docstring: str = "") -> Node:
    return Node(
        qualname, qualname.rsplit(".", 1)[-1], kind, Span("pkg/store.py", start, end),
        header_end, signature, docstring,
    )


MEMSTORE = store_node("pkg.store.MemStore", "class", 6, 17, 6, "class MemStore:",
                      "Keeps what the agent learned.")
REMEMBER = store_node("pkg.store.MemStore.remember", "method", 9, 11, 9,
                      "def remember(self, text):", "Store one memory.")
WRITE = store_node("pkg.store.MemStore._write", "method", 13, 14, 13,
                   "def _write(self, value):")
ENTRY = store_node("pkg.store.MemStore.Entry", "class", 16, 17, 16, "class Entry:")
MODULE = store_node("pkg.store", "module", 1, 17, 0, "", "Persistent memory.")


def test_changed_parsers_invalidate_every_row(
    index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    without_python = plugin_manager(only=[])
    stats = refresh(index, without_python)
    assert [status for _, status, _ in stats.failures] == ["no_parser"] * 4
    assert index.names() == frozenset()

    stats = refresh(index, pm)

    assert (stats.parsed, stats.unchanged, stats.failures) == (4, 0, ())
    assert "qx" in index.names()


def test_a_larger_size_limit_reads_the_files_it_refused(
    index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    assert [f[0] for f in refresh(index, pm, max_file_bytes=200).failures] == [
        "pkg/store.py", "pkg/util.py",
    ]

    stats = refresh(index, pm)

    assert (stats.parsed, stats.unchanged, stats.failures) == (2, 2, ())
    assert [n.qualname for n in index.lookup("qx")] == ["pkg.util.qx"]

    stats = refresh(index, pm, max_file_bytes=200)

    assert (stats.parsed, stats.unchanged) == (2, 2)
    assert index.lookup("qx") == []


def test_read_api(index: CodeIndex, pm: pluggy.PluginManager) -> None:
    refresh(index, pm)

    assert index.names() == frozenset(
        {"MemStore", "remember", "_write", "Entry", "slugify", "qx", "payment_total", "main"}
    )
    words = ["MemStore", "memstore", "MEMSTORE", "remember", "Remember", "qx", "store", "pkg",
             "app", "nothing", ""]
    assert [w for w in words if w in index.defined()] == ["MemStore", "remember", "qx"]
    # Lower-cased names: a word in another case is not one; modules never count.
    assert [w for w in words if w in index.defined(lower=True)] == [
        "memstore", "remember", "qx"
    ]
    # A name written in another case is the one definition of that spelling,
    # its first letter kept: "memStore" would be a variable of that type, and
    # a module is no definition.
    respelled = index.defined().respelled
    assert [respelled(w) for w in ("Memstore", "MEMSTORE", "memStore", "Qx", "Store", "Nothing")] \
        == ["MemStore", "MemStore", None, None, None, None]
    query = build_query("MEMStore forgets; Memstore.Remember too", names=index.defined(),
                        settings=Settings(), respelled=respelled)
    assert (query.identifiers, query.unresolved) == (("MemStore",), ("Memstore.Remember",))
    assert index.lookup("remember") == [REMEMBER]
    assert index.lookup("MemStore.remember") == [REMEMBER]
    assert index.lookup("pkg.store.MemStore.remember") == [REMEMBER]
    assert index.lookup("store.MemStore") == [MEMSTORE]
    assert index.lookup("tore.MemStore") == []  # suffixes match whole components only
    assert index.lookup("memstore") == []  # and are case-sensitive
    assert [n.qualname for n in index.lookup("pkg.store")] == ["pkg.store"]
    assert [n.qualname for n in index.lookup("pkg")] == ["pkg"]

    assert index.file_nodes("pkg/store.py") == [MODULE, MEMSTORE, REMEMBER, WRITE, ENTRY]
    assert index.file_nodes("missing.py") == []

    assert index.innermost("pkg/store.py", 10) == REMEMBER
    assert index.innermost("pkg/store.py", 12) == MEMSTORE
    assert index.innermost("pkg/store.py", 2) == MODULE
    assert index.innermost("pkg/store.py", 18) is None

    assert index.children(MEMSTORE) == [REMEMBER, WRITE, ENTRY]
    assert [n.qualname for n in index.children(MODULE)] == ["pkg.store.MemStore"]
    assert index.children(ENTRY) == []

    assert index.edges_from(REMEMBER) == [
        Edge("pkg.store.MemStore.remember", "invoke", "_write", 11),
        Edge("pkg.store.MemStore.remember", "invoke", "slugify", 11),
    ]
    assert index.edges_from(MODULE) == [
        Edge("pkg.store", "import", "pkg.util.slugify", 3),
        Edge("pkg.store", "contain", "pkg.store.MemStore", 6),
    ]

    assert index.references_to("slugify") == [
        Edge("app.main", "invoke", "slugify", 7),
        Edge("pkg.store", "import", "pkg.util.slugify", 3),
        Edge("pkg.store.MemStore.remember", "invoke", "slugify", 11),
    ]
    assert index.references_to("util.slugify") == [
        Edge("pkg.store", "import", "pkg.util.slugify", 3),
    ]
    assert [(e.source, e.target) for e in index.references_to("MemStore")] == [
        ("app", "pkg.store.MemStore"), ("app.main", "MemStore"),
    ]

    assert index.multiline_statements("pkg/store.py") == ()
    assert index.multiline_statements("app.py") == ()
    assert index.failures() == []


def test_file_nodes_keep_the_most_recently_asked_files_only(
    index: CodeIndex, pm: pluggy.PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queries, "FILE_NODES_CACHED", 2)
    refresh(index, pm)

    for path in ("pkg/store.py", "app.py", "pkg/util.py", "app.py", "pkg/__init__.py"):
        index.file_nodes(path)

    assert list(index._file_nodes) == ["app.py", "pkg/__init__.py"]
    # A file dropped from the cache is read again, the same.
    assert index.file_nodes("pkg/store.py") == [MODULE, MEMSTORE, REMEMBER, WRITE, ENTRY]
    assert list(index._file_nodes) == ["pkg/__init__.py", "pkg/store.py"]


def test_same_qualname_definitions_keep_their_own_edges(
    tmp_path: Path, pm: pluggy.PluginManager
) -> None:
    source = textwrap.dedent('''\
        class Box:
            @property
            def size(self):
                return measure(self)

            @size.setter
            def size(self, value):
                store(value)
        ''')
    root = make_git_repo(tmp_path / "repo", {"box.py": source})
    index = CodeIndex.open(root, tmp_path / "index")
    try:
        index.refresh(pm, GLOBS, Settings())
        getter, setter = index.lookup("Box.size")

        assert (getter.span.start_line, setter.span.start_line) == (2, 6)
        assert index.edges_from(getter) == [Edge("box.Box.size", "invoke", "measure", 4)]
        assert index.edges_from(setter) == [Edge("box.Box.size", "invoke", "store", 8)]
        assert index.children(index.lookup("Box")[0]) == [getter, setter]
        assert index.innermost("box.py", 8) == setter
    finally:
        index.close()


class LineCounts:
    """A plugin keeping each definition's line count, under a key of its own."""

    @hookimpl
    def node_values(self, parsed: ParsedFile) -> list[NodeValues]:
        counts = tuple(
            None if n.kind == "module" else str(n.span.end_line - n.span.start_line + 1).encode()
            for n in parsed.nodes
        )
        return [NodeValues("lines:count", counts)]


def test_values_a_plugin_derives_per_node_live_and_die_with_the_nodes(
    repo: Path, index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    pm.register(LineCounts())
    refresh(index, pm)

    def counts(path: str) -> dict[str, bytes | None]:
        nodes = index.file_nodes(path)
        return dict(zip((n.qualname for n in nodes), index.node_values("lines:count", nodes),
                        strict=True))

    assert counts("pkg/util.py") == {
        "pkg.util": None, "pkg.util.slugify": b"3", "pkg.util.qx": b"3",
        "pkg.util.payment_total": b"3",
    }
    # A reader adds what is missing; another key sees nothing.
    [module, slugify, *_] = index.file_nodes("pkg/util.py")
    index.store_node_values("lines:count", [(module, b"11")])
    assert counts("pkg/util.py")["pkg.util"] == b"11"
    assert index.node_values("other:key", [module, slugify]) == [None, None]

    rewrite(repo / "pkg/util.py", "def slugify(text):\n    return text\n")
    (repo / "app.py").unlink()
    refresh(index, pm)
    assert counts("pkg/util.py") == {"pkg.util": None, "pkg.util.slugify": b"2"}
    assert counts("app.py") == {}
    with closing(sqlite3.connect(index.path)) as conn:
        rows = conn.execute("SELECT count(*) FROM node_values").fetchone()[0]
    # slugify, and in pkg/store.py MemStore, remember, _write, Entry
    assert rows == 5


def test_multiline_statements_are_stored(tmp_path: Path, pm: pluggy.PluginManager) -> None:
    source = "def f(\n    a,\n):\n    x = [\n        a,\n    ]\n    return x\n"
    root = make_git_repo(tmp_path / "repo", {"m.py": source})
    index = CodeIndex.open(root, tmp_path / "index")
    try:
        index.refresh(pm, GLOBS, Settings())
        assert index.multiline_statements("m.py") == ((1, 3), (4, 6))
    finally:
        index.close()


def test_description_search_finds_a_docstring_the_code_never_says(
    index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    refresh(index, pm)

    task = "The checksum for payment records is wrong"
    found = index.search_descriptions(task, 3, POSTINGS).found

    # qx shares "checksum" and "payment" with the task, only in its docstring;
    # payment_total shares "payment", MemStore only "the".
    assert [n.qualname for n, _ in found] == [
        "pkg.util.qx", "pkg.util.payment_total", "pkg.store.MemStore",
    ]
    assert found[0][1] > found[1][1] > found[2][1] > 0
    assert found[0][0] == Node(
        "pkg.util.qx", "qx", "function", Span("pkg/util.py", 6, 8), 6, "def qx(a, b):",
        "Compute the checksum of a payment record.",
    )
    assert index.search_descriptions("", 5, POSTINGS).found == ()
    assert index.search_descriptions("!!! ...", 5, POSTINGS).found == ()
    assert index.search_descriptions("checksum", 0, POSTINGS).found == ()


def test_description_search_is_the_api_index_view(
    index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    refresh(index, pm)

    with sqlite3.connect(index.path) as conn:
        row = conn.execute(
            "SELECT * FROM api_index WHERE qualname = 'pkg.util.qx'"
        ).fetchone()
        modules = conn.execute("SELECT count(*) FROM api_index WHERE kind = 'module'").fetchone()

    assert row == (
        "pkg.util.qx", "function", "def qx(a, b):",
        "Compute the checksum of a payment record.",
        "def qx(a, b): Compute the checksum of a payment record.", "pkg/util.py", 6,
    )
    assert modules == (0,)


def test_default_location_is_the_user_cache_not_the_repo(
    repo: Path, tmp_path: Path, pm: pluggy.PluginManager
) -> None:
    index = CodeIndex.open(repo)
    try:
        index.refresh(pm, GLOBS, Settings())
    finally:
        index.close()

    cache = tmp_path / "xdg-cache" / "ctx04"
    assert index.path.parent.parent == cache
    assert index.path.name == "index.sqlite3"
    assert index.path.parent.name.endswith("-repo")
    assert index.path.is_file()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=repo, capture_output=True,
        text=True, check=True,
    )
    assert status.stdout == ""


def test_a_corrupt_index_is_moved_aside_and_rebuilt(
    built: Path, repo: Path, tmp_path: Path, pm: pluggy.PluginManager
) -> None:
    garbage = b"this is not a database at all " * 200
    built.write_bytes(garbage)

    with closing(CodeIndex.open(repo, tmp_path / "index")) as reopened:
        stats = refresh(reopened, pm)

        assert reopened.recovered is not None
        assert reopened.recovered.startswith("the index was unreadable (file is not a database)")
        [aside] = (tmp_path / "index").glob("index.sqlite3.corrupt-*")
        assert aside.read_bytes() == garbage
        assert (stats.parsed, stats.nodes) == (4, 12)
        assert [n.qualname for n in reopened.lookup("qx")] == ["pkg.util.qx"]


def test_damage_found_during_a_refresh_is_recovered_from(
    built: Path, repo: Path, tmp_path: Path, pm: pluggy.PluginManager
) -> None:
    with sqlite3.connect(built) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        [root_page] = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'edges'"
        ).fetchone()
    with open(built, "r+b") as db:
        # Opening reads the schema, meta and files pages; only writing edges finds this.
        db.seek((root_page - 1) * page_size)
        db.write(b"\xff" * page_size)
    rewrite(repo / "app.py", APP + "\n\ndef extra():\n    pass\n")

    with closing(CodeIndex.open(repo, tmp_path / "index")) as reopened:
        assert reopened.recovered is None
        stats = refresh(reopened, pm)

        assert reopened.recovered is not None
        assert "database disk image is malformed" in reopened.recovered
        assert (stats.parsed, stats.nodes) == (4, 13)
        assert [n.qualname for n in reopened.lookup("extra")] == ["app.extra"]


def test_an_index_of_another_schema_version_is_rebuilt(
    built: Path, repo: Path, tmp_path: Path, pm: pluggy.PluginManager
) -> None:
    with sqlite3.connect(built) as conn:
        conn.execute("UPDATE meta SET value = 'old' WHERE key = 'schema_version'")

    with closing(CodeIndex.open(repo, tmp_path / "index")) as reopened:
        assert reopened.recovered is None
        assert reopened.failures() == []
        assert refresh(reopened, pm).parsed == 4


def test_a_held_lock_times_out_with_a_clear_message(
    repo: Path, tmp_path: Path, pm: pluggy.PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = CodeIndex.open(repo, tmp_path / "index")
    monkeypatch.setattr(opening, "LOCK_TIMEOUT_S", 0.2)
    try:
        with open(index.path.with_name("index.sqlite3.lock"), "a+b") as other:
            fcntl.flock(other, fcntl.LOCK_EX)
            with pytest.raises(IndexUnavailable) as raised:
                refresh(index, pm)
        assert str(raised.value) == (
            f"another ctx04 process is indexing {repo.resolve()}; try again when it finishes"
        )
        assert refresh(index, pm).parsed == 4
    finally:
        index.close()


def test_a_waiter_outlasts_the_timeout_while_the_holder_makes_progress(
    repo: Path, tmp_path: Path, pm: pluggy.PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = CodeIndex.open(repo, tmp_path / "index")
    monkeypatch.setattr(opening, "LOCK_TIMEOUT_S", 0.3)
    lock = index.path.with_name("index.sqlite3.lock")
    released = threading.Event()
    holding = threading.Event()

    def busy_builder() -> None:
        # Holds the lock for ten timeouts, beating like a builder between batches.
        with open(lock, "a+b") as other:
            fcntl.flock(other, fcntl.LOCK_EX)
            holding.set()
            for _ in range(30):
                time.sleep(0.1)
                lock.touch()
            released.set()
            fcntl.flock(other, fcntl.LOCK_UN)

    builder = threading.Thread(target=busy_builder)
    builder.start()
    try:
        holding.wait()
        stats = refresh(index, pm)
        assert released.is_set()  # it waited for the busy holder instead of failing
        assert stats.parsed == 4
    finally:
        builder.join()
        index.close()


CHILD = """
import json, sys
from pathlib import Path
from ctx04_core.index import CodeIndex
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
index = CodeIndex.open(Path(sys.argv[1]), Path(sys.argv[2]))
stats = index.refresh(plugin_manager(only=["python"]), ("*.py",), Settings())
print(json.dumps([stats.parsed, stats.unchanged, stats.nodes]))
"""


def test_two_processes_refreshing_at_once_both_succeed(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"pkg/mod{i}.py": f"def f{i}(x):\n    return g{i}(x)\n\n\nclass C{i}:\n    pass\n"
        for i in range(300)
    }
    root = make_git_repo(tmp_path / "repo", files)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root), str(tmp_path / "index")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for _ in range(2)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(json.loads(out))

    # One process built the index; the other waited and found nothing to do.
    assert sorted(results) == [[0, 300, 900], [300, 0, 900]]
    index = CodeIndex.open(root, tmp_path / "index")
    try:
        assert len(index.names()) == 600
        assert [n.qualname for n in index.lookup("f7")] == ["pkg.mod7.f7"]
    finally:
        index.close()


def test_an_index_folder_that_cannot_be_written_is_one_clear_error(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", {"a.py": "def f():\n    return 1\n"})
    folder = tmp_path / "index"
    # Root writes through mode 555, so the lock is made unopenable another way.
    (folder / "index.sqlite3.lock").mkdir(parents=True)
    with pytest.raises(IndexUnavailable) as caught:
        CodeIndex.open(root, folder)
    assert str(caught.value) == (
        f"cannot write the index folder {folder}: Is a directory; "
        "give a writable one with --index-dir"
    )
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ctx04"), "retrieve", "f returns 1", "--repo",
         str(root), "--index-dir", str(folder)],
        capture_output=True, text=True, check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ctx04: error: {caught.value}\n"


@pytest.mark.parametrize("settled", [False, True], ids=["racy", "settled"])
def test_a_same_size_edit_with_the_old_mtime_restored_is_parsed_again(
    repo: Path, index: CodeIndex, pm: pluggy.PluginManager, recorder: Recorder, settled: bool
) -> None:
    target = repo / "pkg/util.py"
    if settled:
        # Older than the racy window when first read: only the stat decides,
        # and the ctime (which no one can set back) tells the edit apart.
        time.sleep(refresh_module.RACY_NS / 1e9 + 0.1)
    refresh(index, pm)
    recorder.seen.clear()
    before = target.stat()
    text = target.read_text()
    edited = text.replace("slugify", "slugifx")
    assert len(edited) == len(text) != 0 and edited != text
    target.write_text(edited)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # touch -r
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)

    stats = refresh(index, pm)

    assert (stats.parsed, recorder.seen) == (1, ["pkg/util.py"])
    assert [n.qualname for n in index.lookup("slugifx")] == ["pkg.util.slugifx"]
    assert index.lookup("slugify") == []


def damage_table(path: Path, table: str) -> None:
    """Overwrite the root page of ``table``: opening and refreshing read past it."""
    with sqlite3.connect(path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        [root_page] = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    with open(path, "r+b") as db:
        db.seek((root_page - 1) * page_size)
        db.write(b"\xff" * page_size)


def test_damage_a_query_finds_after_opening_is_recovered_from(repo: Path, tmp_path: Path) -> None:
    from ctx04_core.pipeline import retrieve

    folder = tmp_path / "index"
    task = "MemStore.remember drops the slug"
    first = retrieve(task, repo, index_dir=folder)
    damage_table(folder / "index.sqlite3", "nodes")

    again = retrieve(task, repo, index_dir=folder)

    assert again.index.recovered is not None
    assert again.index.recovered.startswith(
        "the index was unreadable (database disk image is malformed); moved it to "
        "index.sqlite3.corrupt-"
    )
    assert len(list(folder.glob("index.sqlite3.corrupt-*"))) == 1
    assert [r.candidate for r in again.candidates] == [r.candidate for r in first.candidates]


def test_index_check_finds_damage_and_rebuilds(repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "index"
    ctx04 = [str(Path(sys.executable).parent / "ctx04"), "index", "--repo", str(repo),
             "--index-dir", str(folder)]
    wide = {**os.environ, "COLUMNS": "200"}
    assert subprocess.run(ctx04, capture_output=True, check=True, env=wide).returncode == 0
    damage_table(folder / "index.sqlite3", "edges")
    # A plain refresh reads no edges page: it reports success and repairs nothing.
    plain = subprocess.run(ctx04, capture_output=True, text=True, check=True, env=wide)
    assert "unreadable" not in plain.stdout

    checked = subprocess.run([*ctx04, "--check"], capture_output=True, text=True, check=True,
                             env=wide)

    assert checked.stdout.startswith("the index was unreadable (")
    assert "moved it to index.sqlite3.corrupt-" in checked.stdout
    clean = subprocess.run([*ctx04, "--check"], capture_output=True, text=True, check=True,
                           env=wide)
    assert "integrity check: ok" in clean.stdout.splitlines()


class ParsingProcesses:
    """A parser plugin that notes which processes are asked to parse, and defers."""

    def __init__(self, log: Path) -> None:
        self.log = log

    @hookimpl
    def parse_file(self, path: str, text: str) -> None:
        with self.log.open("a") as handle:
            handle.write(f"{os.getpid()}\n")

    def pids(self) -> set[int]:
        return {int(line) for line in self.log.read_text().split()}


def _stored(path: Path) -> list[list[tuple[object, ...]]]:
    """Everything an index holds per file, without its ids, sorted."""
    with closing(sqlite3.connect(path)) as conn:
        return [sorted(conn.execute(sql).fetchall()) for sql in (
            "SELECT path, key, size, language, status, message, statements FROM files",
            "SELECT f.path, n.qualname, n.name, n.kind, n.start_line, n.end_line, n.header_end, "
            "n.signature, n.docstring FROM nodes n JOIN files f ON f.id = n.file_id",
            "SELECT f.path, n.qualname, n.start_line, e.kind, e.target, e.target_name, e.line "
            "FROM edges e JOIN nodes n ON n.id = e.src_node_id JOIN files f ON f.id = n.file_id",
            "SELECT f.path, n.qualname, n.start_line, t.tokens FROM api_fts t "
            "JOIN nodes n ON n.id = t.rowid JOIN files f ON f.id = n.file_id",
            "SELECT f.path, n.qualname, n.start_line, t.tokens FROM code_fts t "
            "JOIN nodes n ON n.id = t.rowid JOIN files f ON f.id = n.file_id",
        )]


def test_files_parsed_in_worker_processes_are_stored_as_parsed_one_by_one(
    tmp_path: Path,
) -> None:
    count = parsing.PARALLEL_MIN_FILES + 40
    files = {
        f"pkg{i % 7}/mod{i}.py": f'"""Module {i}."""\nfrom pkg0.mod0 import helper0\n\n\n'
        f"class Store{i}:\n    \"\"\"Keeps record {i}.\"\"\"\n\n"
        f"    def save{i}(self, value):\n        return helper0(value) + {i}\n\n\n"
        f"def helper{i}(value):\n    \"\"\"Double it.\"\"\"\n    return Store{i}().save{i}(value)\n"
        for i in range(count)
    }
    files["pkg3/broken.py"] = "def broken(:\n"
    root = make_git_repo(tmp_path / "repo", files)
    pm = plugin_manager(only=["python"])
    parsers = ParsingProcesses(tmp_path / "pids")
    pm.register(parsers)
    settings = Settings()

    at_once = CodeIndex.open(root, tmp_path / "at-once")
    first = at_once.refresh(pm, GLOBS, settings)  # enough files for the workers
    at_once.close()
    if len(os.sched_getaffinity(0)) > 1:
        assert os.getpid() not in parsers.pids() and len(parsers.pids()) > 1
    # The same files, brought in by refreshes that each read fewer than the
    # workers' threshold, so each file is parsed in this process.
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for rel in sorted(files)[100:]:
        (hidden / rel.replace("/", "_")).write_bytes((root / rel).read_bytes())
        (root / rel).unlink()
    one_by_one = CodeIndex.open(root, tmp_path / "one-by-one")
    refresh(one_by_one, pm)
    for rel in sorted(files)[100:]:
        (root / rel).write_bytes((hidden / rel.replace("/", "_")).read_bytes())
        if sorted(files).index(rel) % 100 == 99:
            assert refresh(one_by_one, pm).parsed == 100
    last = refresh(one_by_one, pm)
    one_by_one.close()

    assert (first.files, first.parsed, first.nodes) == (count + 1, count + 1, 4 * count)
    assert (last.files, last.nodes, last.edges) == (first.files, first.nodes, first.edges)
    assert first.failures == (("pkg3/broken.py", "syntax_error", "line 1: invalid syntax"),)
    assert _stored(tmp_path / "at-once" / "index.sqlite3") == _stored(
        tmp_path / "one-by-one" / "index.sqlite3"
    )


def test_the_searches_count_terms_anew_after_a_refresh(
    repo: Path, index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    refresh(index, pm)
    assert index.term_statistics(["amounts", "fragment"])[1] == {"amounts": 1, "fragment": 1}
    # Both terms in one row each: a budget of 1 row searches the first only.
    assert index.search_code(["amounts", "fragment"], 5, 1).left_out == ("fragment",)
    rewrite(repo / "pkg/util.py", UTIL.replace("URL fragment", "URL fragment of amounts"))

    refresh(index, pm)

    assert index.term_statistics(["amounts", "fragment"])[1] == {"amounts": 2, "fragment": 1}
    bounded = index.search_code(["amounts", "fragment"], 5, 1)
    assert bounded.left_out == ("amounts",)
    assert [n.qualname for n, _ in bounded.found] == ["pkg.util.slugify"]


def test_counts_kept_before_an_older_ctx04_wrote_are_counted_again(
    index: CodeIndex, pm: pluggy.PluginManager
) -> None:
    first = refresh(index, pm)
    assert first.edges > 0
    # What an older ctx04's refresh did: rows written, the 'parsers' row
    # rewritten, the kept counts left as they were.
    with closing(sqlite3.connect(index.path)) as conn, conn:
        conn.execute("DELETE FROM edges")
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) SELECT key, value FROM meta "
            "WHERE key = 'parsers'"
        )

    again = refresh(index, pm)

    assert (again.parsed, again.nodes, again.edges) == (0, first.nodes, 0)
