"""Gold files, lines and symbols from a patch, exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_fixture import Bench, build, git

from ctx04_core.bench.dataset import load_instances
from ctx04_core.bench.gold import (
    Gold,
    GoldError,
    GoldSymbol,
    file_symbols,
    gold_from_patch,
    gold_lines,
)
from ctx04_core.bench.trees import materialise
from ctx04_core.plugins import plugin_manager


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
