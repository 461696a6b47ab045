"""The Python parser plugin: exact nodes, edges and statement spans from real source."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_git_repo

from ctx04_core import retrieve
from ctx04_core.index.python_parser import module_qualname, parse_file, source_globs
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.types import Edge, Node, ParsedFile, Span

MEMSTORE = '''\
"""Long-term memory for the agent.

Details nobody reads.
"""
from __future__ import annotations

import os.path
from . import utils
from .base import Base, helper as assist
from ..core import errors

try:
    import ujson as json
except ImportError:
    def dumps(obj):  # fallback
        return str(obj)


class MemStore(Base):
    """Stores memories
    for later recall.

    Second paragraph.
    """

    limit = compute_limit()

    @cached
    @trace("remember")
    def remember(self, text, kind=None,
                 importance=0.5):  # noqa: E501
        """Remember ``text``."""
        self._ensure_open()

        def normalise(value):
            return value.strip().lower()

        return utils.save(os.path.join("a", normalise(text)))

    @property
    def size(self) -> int:
        return self.helper()

    @size.setter
    def size(self, value: int) -> None:
        self.helper()
        assist(value)

    class Meta: pass

    def one(self): return 1


async def main(argv: list[str] = ["#x"]) -> None:
    store = (
        MemStore()
        .remember("t")
    )
    items[0].run()
'''

P = "agent/memstore.py"
M = "agent.memstore"


def parse(path: str, text: str) -> ParsedFile | None:
    """The plugin's ``parse_file`` with the default settings."""
    return parse_file(path=path, text=text, settings=Settings())


def node(
    qualname: str, kind: str, start: int, end: int, header_end: int, signature: str,
    docstring: str = "",
) -> Node:
    return Node(
        qualname, qualname.rsplit(".", 1)[-1], kind, Span(P, start, end), header_end,
        signature, docstring,
    )


def test_nodes_of_a_realistic_module() -> None:
    parsed = parse(path=P, text=MEMSTORE)

    assert parsed is not None
    assert parsed.language == "python"
    assert parsed.nodes == (
        node(M, "module", 1, 59, 0, "", "Long-term memory for the agent."),
        node(f"{M}.dumps", "function", 15, 16, 15, "def dumps(obj):"),
        node(f"{M}.MemStore", "class", 19, 51, 19, "class MemStore(Base):",
             "Stores memories for later recall."),
        node(f"{M}.MemStore.remember", "method", 28, 38, 31,
             "def remember(self, text, kind=None, importance=0.5):", "Remember ``text``."),
        node(f"{M}.MemStore.size", "method", 40, 42, 41, "def size(self) -> int:"),
        node(f"{M}.MemStore.size", "method", 44, 47, 45, "def size(self, value: int) -> None:"),
        node(f"{M}.MemStore.Meta", "class", 49, 49, 49, "class Meta:"),
        node(f"{M}.MemStore.one", "method", 51, 51, 51, "def one(self):"),
        node(f"{M}.main", "function", 54, 59, 54,
             'async def main(argv: list[str] = ["#x"]) -> None:'),
    )


def test_edges_of_a_realistic_module() -> None:
    parsed = parse(path=P, text=MEMSTORE)

    assert parsed is not None
    cls, remember, size = f"{M}.MemStore", f"{M}.MemStore.remember", f"{M}.MemStore.size"
    assert parsed.edges == (
        Edge(M, "import", "__future__.annotations", 5),
        Edge(M, "import", "os.path", 7),
        Edge(M, "import", "agent.utils", 8),
        Edge(M, "import", "agent.base.Base", 9),
        Edge(M, "import", "agent.base.helper", 9),
        Edge(M, "import", "core.errors", 10),
        Edge(M, "import", "ujson", 13),
        Edge(M, "contain", f"{M}.dumps", 15),
        Edge(f"{M}.dumps", "invoke", "str", 16),
        Edge(M, "contain", cls, 19),
        Edge(cls, "invoke", "compute_limit", 26),
        Edge(cls, "contain", remember, 28),
        Edge(remember, "invoke", "trace", 29),
        Edge(remember, "invoke", "_ensure_open", 33),
        # The nested function is part of remember's body, and so are its calls.
        Edge(remember, "invoke", "strip", 36),
        Edge(remember, "invoke", "join", 38),
        Edge(remember, "invoke", "normalise", 38),
        Edge(remember, "invoke", "save", 38),
        # Getter and setter share a qualname; each edge's line says which one it is.
        Edge(cls, "contain", size, 40),
        Edge(size, "invoke", "helper", 42),
        Edge(cls, "contain", size, 44),
        Edge(size, "invoke", "helper", 46),
        Edge(size, "invoke", "assist", 47),
        Edge(cls, "contain", f"{M}.MemStore.Meta", 49),
        Edge(cls, "contain", f"{M}.MemStore.one", 51),
        Edge(M, "contain", f"{M}.main", 54),
        # `.remember` on a call's result and `.run` on a subscript are not followed.
        Edge(f"{M}.main", "invoke", "MemStore", 56),
    )


def test_multiline_statements_of_a_realistic_module() -> None:
    parsed = parse(path=P, text=MEMSTORE)

    assert parsed is not None
    # Module docstring, class docstring, remember's two-line header, the parenthesised
    # assignment; one-line headers and one-liners are not listed.
    assert parsed.multiline_statements == ((1, 4), (20, 24), (30, 31), (55, 58))


COMPOUND = '''\
import os


@decorate(
    flag=True,
)
def build(
    a,
    b,
):
    # comment before the body
    if (a and
            b):
        return 1
    for item in (
        a, b
    ):
        pass
    while a: a -= 1
    with open(a) as fa, \\
         open(b) as fb:
        pass
    match a:
        case {
            "k": v,
        }:
            pass
    value = {
        "x": 1,
    }
    if (a or
            b): return 2
    try:
        pass
    except (
        ValueError,
    ):
        pass
    return value
'''


def test_compound_statements_keep_only_their_headers() -> None:
    parsed = parse(path="m.py", text=COMPOUND)

    assert parsed is not None
    assert parsed.multiline_statements == (
        (4, 6),  # the decorator, apart from the header
        (7, 10),  # the def header, without the comment before the body
        (12, 13),
        (15, 17),
        (20, 21),  # backslash continuation
        (24, 26),  # a case pattern
        (28, 30),
        (31, 32),  # a header whose body shares its last line
        (35, 37),  # an except clause
    )
    assert parsed.nodes[1] == Node(
        "m.build", "build", "function", Span("m.py", 4, 39), 10, "def build( a, b, ):", ""
    )


@pytest.mark.parametrize(
    ("path", "qualname", "imports"),
    [
        ("pkg/sub/mod.py", "pkg.sub.mod", ("pkg.sub.x", "pkg.sub.y.z", "pkg.w")),
        ("pkg/__init__.py", "pkg", ("pkg.x", "pkg.y.z", "w")),
        ("setup.py", "setup", ("x", "y.z", "w")),
        # The root itself is the package: its modules have top-level names.
        ("__init__.py", "__init__", ("x", "y.z", "w")),
    ],
)
def test_module_names_and_relative_imports(
    path: str, qualname: str, imports: tuple[str, ...]
) -> None:
    parsed = parse(path=path, text="from . import x\nfrom .y import z\nfrom .. import w\n")

    assert parsed is not None
    assert module_qualname(path) == qualname
    assert parsed.nodes == (
        Node(qualname, qualname.rsplit(".", 1)[-1], "module", Span(path, 1, 3), 0, "", ""),
    )
    assert tuple(e.target for e in parsed.edges) == imports
    assert {e.kind for e in parsed.edges} == {"import"}


def test_star_import_targets_the_module() -> None:
    parsed = parse(path="a/b.py", text="from .c import *\nfrom os.path import *\n")

    assert parsed is not None
    assert [e.target for e in parsed.edges] == ["a.c", "os.path"]


def test_empty_file_is_a_one_line_module() -> None:
    assert parse(path="pkg/__init__.py", text="") == ParsedFile(
        "python", (Node("pkg", "pkg", "module", Span("pkg/__init__.py", 1, 1), 0, "", ""),),
        (), (),
    )


def test_definitions_under_type_checking_and_with_blocks_are_nodes() -> None:
    text = (
        "if TYPE_CHECKING:\n"
        "    class Proto: ...\n"
        "else:\n"
        "    Proto = object\n"
        "with suppress(ImportError):\n"
        "    def fast(): pass\n"
        "for name in names:\n"
        "    def hidden(): pass\n"
    )
    parsed = parse(path="t.py", text=text)

    assert parsed is not None
    assert [(n.qualname, n.kind) for n in parsed.nodes] == [
        ("t", "module"), ("t.Proto", "class"), ("t.fast", "function"),
    ]
    assert [(e.source, e.kind, e.target) for e in parsed.edges] == [
        ("t", "contain", "t.Proto"), ("t", "invoke", "suppress"), ("t", "contain", "t.fast"),
    ]


def test_docstring_is_the_first_paragraph_folded_and_capped() -> None:
    long = "word " * 60
    parsed = parse(path="d.py", text=f'def f():\n    """{long}\n\n    More."""\n')

    assert parsed is not None
    assert parsed.nodes[1].docstring == long.strip()[:200].rstrip()
    assert len(parsed.nodes[1].docstring) <= 200


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("def f(:\n", "invalid syntax"),
        ("x = 1\0\n", "source code string cannot contain null bytes"),
        ("  x = 1\n", "unexpected indent"),
    ],
)
def test_a_file_that_does_not_parse_raises_syntax_error(text: str, message: str) -> None:
    with pytest.raises(SyntaxError) as raised:
        parse(path="bad.py", text=text)
    assert raised.value.msg == message


# Valid for Python 3.12 (a nested f-string, PEP 695 type parameters) or for
# Python 2 (a print statement), not for the 3.11 that runs ctx04.
NEWER_AND_OLDER = '''\
def first[T](items: list[T]) -> T:
    return items[0]


class Report[K: (str, bytes)](Base):
    def line(self, name):
        return f"{", ".join(f"{n}" for n in name)}"

    def legacy(self):
        print "done"
        return self.total
'''


def test_a_file_another_python_parses_keeps_its_definitions() -> None:
    parsed = parse(path="report.py", text=NEWER_AND_OLDER)

    assert parsed is not None
    assert [(n.qualname, n.span.start_line, n.span.end_line, n.signature)
            for n in parsed.nodes] == [
        ("report", 1, 11, ""),
        ("report.first", 1, 2, "def first(items: list[T]) -> T:"),
        ("report.Report", 5, 11, "class Report(Base):"),
        ("report.Report.line", 6, 7, "def line(self, name):"),
        ("report.Report.legacy", 9, 11, "def legacy(self):"),
    ]
    # The lines left out: the headers lost their type parameters, the rest is blank.
    assert parsed.error_lines == (1, 5, 7, 10)


def test_a_file_another_python_parses_is_indexed_in_part_and_retrieved(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", {"report.py": NEWER_AND_OLDER})

    result = retrieve("Report.legacy prints done to stdout", root)

    assert result.index.failures == (
        ("report.py", "partial", "indexed around code that does not parse at line(s) 1, 5, 7, 10"),
    )
    top = result.candidates[0].candidate
    assert (top.qualname, top.span.start_line, top.span.end_line) == ("report.Report.legacy", 9, 11)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Leaving out more than half of the code would say little about the file.
        ("def f():\n" + '    print "a"\n' * 3 + "    return 1\n",
         "Missing parentheses in call to 'print'. Did you mean print(...)?"),
        # At most 32 lines are left out.
        ("def f():\n" + '    print "a"\n' * 33 + "    return 1\n" * 40,
         "Missing parentheses in call to 'print'. Did you mean print(...)?"),
    ],
)
def test_a_file_mostly_not_parsed_stays_a_syntax_error(text: str, message: str) -> None:
    with pytest.raises(SyntaxError) as raised:
        parse(path="legacy.py", text=text)
    assert raised.value.msg == message
    assert raised.value.lineno == 2


def test_the_repositorys_own_warnings_are_not_printed(recwarn: pytest.WarningsRecorder) -> None:
    parsed = parse(path="w.py", text='PATTERN = "\\d+"\nassert (PATTERN, 1)\n')

    assert parsed is not None
    assert len(recwarn) == 0


def test_other_languages_are_left_to_other_parsers() -> None:
    assert parse(path="main.go", text="package main\n") is None
    assert source_globs() == ["*.py"]


def test_registered_as_the_python_plugin() -> None:
    pm = plugin_manager(only=["python"])

    assert pm.hook.source_globs() == [["*.py"]]
    parsed = pm.hook.parse_file(path="a.py", text="def f(): pass\n", settings=Settings())
    assert [n.qualname for n in parsed.nodes] == ["a", "a.f"]
