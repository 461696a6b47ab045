"""The BM25 baseline's documents: definitions of any language, chunks of unparsed files."""

from __future__ import annotations

from pathlib import Path

from bench_fixture import SHAPES_NODES, node
from conftest import make_git_repo

from ctx04_core.bench.systems import file_documents, run_bm25
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.types import Node, Span


def documents(
    path: str, nodes: tuple[Node, ...], line_count: int
) -> list[tuple[str, str | None, Span, list[int]]]:
    return [(c.kind, c.qualname, c.span, lines)
            for c, lines in file_documents(path, nodes, line_count)]


def test_a_file_without_nodes_is_cut_into_runs_of_60_lines() -> None:
    assert documents("src/lib.rs", (), 130) == [
        ("lines", None, Span("src/lib.rs", 1, 60), list(range(1, 61))),
        ("lines", None, Span("src/lib.rs", 61, 120), list(range(61, 121))),
        ("lines", None, Span("src/lib.rs", 121, 130), list(range(121, 131))),
    ]
    assert documents("src/lib.rs", (), 60) == [
        ("lines", None, Span("src/lib.rs", 1, 60), list(range(1, 61))),
    ]
    assert documents("empty.rs", (), 0) == []


def test_definitions_of_other_kinds_and_the_lines_outside_them() -> None:
    path = "src/shapes.rs"
    assert documents(path, SHAPES_NODES, 17) == [
        ("struct", "shapes.Point", Span(path, 3, 5), [3, 4, 5]),
        ("impl", "shapes.Point", Span(path, 7, 13), [7, 11, 12, 13]),
        ("method", "shapes.Point.norm", Span(path, 8, 10), [8, 9, 10]),
        ("trait", "shapes.Shape", Span(path, 15, 17), [15, 17]),
        ("method", "shapes.Shape.area", Span(path, 16, 16), [16]),
        # No module node: the rest of the file is one more document, the file itself.
        ("lines", None, Span(path, 1, 14), [1, 2, 6, 14]),
    ]


def test_a_module_node_holds_the_rest_of_the_file() -> None:
    nodes = (node("m", "module", 1, 6, "m.py"), node("m.f", "function", 3, 4, "m.py"))
    assert documents("m.py", nodes, 6) == [
        ("module", "m", Span("m.py", 1, 6), [1, 2, 5, 6]),
        ("function", "m.f", Span("m.py", 3, 4), [3, 4]),
    ]


BROKEN = "".join(
    "    quota = compute(\n" if n == 65 else f"# line {n}\n" for n in range(1, 71)
)


def test_bm25_ranks_chunks_of_a_file_that_does_not_parse(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", {
        "ok.py": "def refill():\n    return 'quota'\n",
        "broken.py": BROKEN,  # an indented line 65: a syntax error
    })
    answer = run_bm25("the quota is wrong", root, Settings(), plugin_manager())
    assert [(r.rank, r.path, r.qualname, r.kind, r.start_line, r.end_line, r.included)
            for r in answer.ranked] == [
        (1, "ok.py", "ok.refill", "function", 1, 2, True),
        (2, "broken.py", None, "lines", 61, 70, True),
    ]
    assert [(s.path, s.lines) for s in answer.shown] == [
        ("ok.py", (1, 2)), ("broken.py", tuple(range(61, 71))),
    ]
