"""Gold files, lines and symbols from a patch, exactly."""

from __future__ import annotations

from pathlib import Path

import pluggy
import pytest
from bench_fixture import SHAPES_NODES, SHAPES_RS, Bench, build, git, node

from ctx04_core import hookspecs
from ctx04_core.bench.dataset import DatasetError, load_instances
from ctx04_core.bench.gold import (
    Gold,
    GoldError,
    GoldSymbol,
    file_symbols,
    gold_from_patch,
    gold_lines,
)
from ctx04_core.bench.trees import materialise
from ctx04_core.hookspecs import hookimpl
from ctx04_core.plugins import plugin_manager
from ctx04_core.stages.regions import node_own_lines
from ctx04_core.types import Node, ParsedFile


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return build(tmp_path)


def gold_of(bench: Bench, tmp_path: Path, index: int) -> Gold:
    instance = load_instances(bench.dataset)[index]
    tree = materialise(bench.repo / ".git", instance.base_commit, tmp_path / "trees" / str(index))
    return gold_from_patch(instance.patch, tree.root, plugin_manager())


def test_a_pure_insertion_is_the_line_before_it(bench: Bench, tmp_path: Path) -> None:
    gold = gold_of(bench, tmp_path, 0)
    assert gold.files == ("calc/ops.py",)
    assert dict(gold.lines) == {"calc/ops.py": (12,)}  # the docstring line before the insert
    assert gold.symbols == (GoldSymbol("calc/ops.py", "calc.ops.divide", "function", ((11, 13),)),)


def test_module_class_and_method_symbols(bench: Bench, tmp_path: Path) -> None:
    gold = gold_of(bench, tmp_path, 1)
    assert gold.files == ("calc/ops.py",)  # calc/new.py is new: not at base
    assert dict(gold.lines) == {"calc/ops.py": (4, 21, 24)}
    assert gold.symbols == (
        # The module's and the class's regions are their own lines, without
        # the definitions nested in them.
        GoldSymbol("calc/ops.py", "calc.ops", "module", ((1, 6), (9, 10), (16, 17), (29, 30))),
        GoldSymbol("calc/ops.py", "calc.ops.Stats", "class", ((18, 22), (26, 26))),
        GoldSymbol("calc/ops.py", "calc.ops.Stats.mean", "method", ((23, 25),)),
    )
    assert gold.to_json()["symbols"][1] == {
        "path": "calc/ops.py", "qualname": "calc.ops.Stats", "kind": "class",
        "region": [[18, 22], [26, 26]],
    }


def test_old_side_lines_of_hand_written_patches() -> None:
    patch = """\
diff --git a/m.py b/m.py
--- a/m.py
+++ b/m.py
@@ -3,4 +3,3 @@ def f():
 keep
-gone
-changed
+new
 keep
@@ -20,0 +20,2 @@
+added
+added
diff --git a/top.py b/top.py
--- a/top.py
+++ b/top.py
@@ -0,0 +1 @@
+first
diff --git a/dead.py b/dead.py
deleted file mode 100644
--- a/dead.py
+++ /dev/null
@@ -1,2 +0,0 @@
-a
-b
\\ No newline at end of file
diff --git a/new.py b/new.py
new file mode 100644
--- /dev/null
+++ b/new.py
@@ -0,0 +1 @@
+x
diff --git a/old name.py b/renamed.py
--- "a/old name.py"
+++ b/renamed.py
@@ -1 +1 @@
-old
+new
"""
    assert gold_lines(patch) == {
        "m.py": (4, 5, 20),  # modified lines; an insertion after 20 (-U0) is line 20
        "top.py": (1,),  # an insertion before line 1 is line 1
        "dead.py": (1, 2),
        "old name.py": (1,),
    }


def test_a_hunk_is_read_where_its_old_side_is() -> None:
    # Headers written against another commit: the first hunk's old side is
    # ten lines further down; the second is where it says; the third's old
    # side is nowhere, so its header stands.
    patch = """\
diff --git a/m.txt b/m.txt
--- a/m.txt
+++ b/m.txt
@@ -3,3 +3,3 @@
 line 13
-line 14
+changed
 line 15
@@ -20,2 +20,3 @@
 line 20
+added
 line 21
@@ -25,2 +26,2 @@
-nowhere
+x
 line 26
diff --git a/twice.txt b/twice.txt
--- a/twice.txt
+++ b/twice.txt
@@ -4 +4 @@
-same
+other
"""
    texts = {
        "m.txt": "".join(f"line {n}\n" for n in range(1, 31)),
        "twice.txt": "x\nsame\nx\nx\nx\nsame\nx\n",  # two lines off either way: the later
    }
    assert gold_lines(patch, texts.get) == {"m.txt": (14, 20, 25), "twice.txt": (6,)}
    assert gold_lines(patch) == {"m.txt": (4, 20, 25), "twice.txt": (4,)}


def test_a_file_that_does_not_parse_is_its_own_symbol() -> None:
    pm = plugin_manager()
    broken = "def f(:\n    pass\nx = 1\n"
    assert file_symbols("bad.py", broken, (2,), pm) == [
        GoldSymbol("bad.py", None, "file", ((1, 3),))
    ]
    assert file_symbols("notes.txt", "a\nb\n", (1,), pm) == [
        GoldSymbol("notes.txt", None, "file", ((1, 2),))
    ]
    assert file_symbols("gone.py", None, (1,), pm) == [GoldSymbol("gone.py", None, "file", ())]


def test_a_patch_that_only_adds_files_has_no_gold(bench: Bench, tmp_path: Path) -> None:
    patch = git(bench.repo, "diff", bench.commits["A"], bench.commits["C"], "--", "calc/new.py")
    with pytest.raises(GoldError):
        gold_from_patch(patch, bench.repo, plugin_manager())


class FakeParser:
    """A parser plugin giving fixed nodes for the paths it knows."""

    def __init__(self, nodes: dict[str, tuple[Node, ...]]) -> None:
        self.nodes = nodes

    @hookimpl
    def parse_file(self, path: str) -> ParsedFile | None:
        found = self.nodes.get(path)
        return None if found is None else ParsedFile("rust", found, (), ())


def parser_pm(*plugins: object) -> pluggy.PluginManager:
    """A plugin manager with just these plugins (none: no parser at all)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def test_symbols_of_other_languages_kinds() -> None:
    pm = parser_pm(FakeParser({"src/shapes.rs": SHAPES_NODES}))
    # 1: outside every node of a parser without module node; 4: in the struct;
    # 9: the method, not the impl around it; 12: the impl's own line; 16: a trait
    # method. The struct and its impl share a qualname: one symbol, both regions.
    assert file_symbols("src/shapes.rs", SHAPES_RS, (1, 4, 9, 12, 16), pm) == [
        GoldSymbol("src/shapes.rs", None, "file", ((1, 17),)),
        GoldSymbol("src/shapes.rs", "shapes.Point", "struct", ((3, 5), (7, 7), (11, 13))),
        GoldSymbol("src/shapes.rs", "shapes.Point.norm", "method", ((8, 10),)),
        GoldSymbol("src/shapes.rs", "shapes.Shape.area", "method", ((16, 16),)),
    ]
    # The trait's own lines are its span less its method.
    assert file_symbols("src/shapes.rs", SHAPES_RS, (15,), pm) == [
        GoldSymbol("src/shapes.rs", "shapes.Shape", "trait", ((15, 15), (17, 17))),
    ]


def test_a_type_as_large_as_its_module_is_nested_in_it() -> None:
    nodes = (node("point", "module", 1, 3, "point.go"), node("point.Point", "struct", 1, 3,
                                                            "point.go"))
    pm = parser_pm(FakeParser({"point.go": nodes}))
    text = "type Point struct {\n\tX int\n}\n"
    assert file_symbols("point.go", text, (2,), pm) == [
        GoldSymbol("point.go", "point.Point", "struct", ((1, 3),)),
    ]
    assert node_own_lines(nodes[0], nodes) == []


def test_a_language_without_parser_is_the_file_itself() -> None:
    text = "package main\n\nfunc main() {\n}\n"
    assert file_symbols("cmd/main.go", text, (3,), parser_pm()) == [
        GoldSymbol("cmd/main.go", None, "file", ((1, 4),))
    ]


def test_the_language_field(bench: Bench, tmp_path: Path) -> None:
    first, second = bench.dataset.read_text().splitlines()
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text(first + "\n" + second.replace('{"instance_id"', '{"language": "Python", '
                                                      '"instance_id"') + "\n")
    assert [i.language for i in load_instances(labelled)] == [None, "Python"]
    labelled.write_text(first.replace('{"instance_id"', '{"language": 3, "instance_id"') + "\n")
    with pytest.raises(DatasetError, match=r"labelled.jsonl:1: field language is not a string"):
        load_instances(labelled)
