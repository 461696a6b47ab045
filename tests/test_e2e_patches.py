"""A model's answer made into a patch (ctx04_core/bench/patches.py), on a real tree with
real ``git apply --check``: what is accepted, and every way an answer is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write_files

from ctx04_core.bench.patches import (
    DOES_NOT_APPLY,
    NO_PATCH,
    UNSAFE_PATH,
    PatchRefused,
    extract_patch,
    parse_edits,
)

OPS = "def f(a, b):\n    return a / b\n\n\ndef g():\n    pass"  # no newline at the end


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    write_files(root, {"calc/ops.py": OPS, "calc/__init__.py": ""})
    outside = tmp_path / "outside"
    write_files(outside, {"secret.py": "KEY = 1\n"})
    os.symlink(outside, root / "out")  # a folder link leading out of the tree
    os.symlink("calc", root / "inner")  # a folder link inside it
    os.symlink("calc/ops.py", root / "alias.py")  # a file link
    return root


def block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def refused(answer: str, tree: Path) -> tuple[str, str]:
    with pytest.raises(PatchRefused) as caught:
        extract_patch(answer, tree)
    return caught.value.kind, str(caught.value)


def test_an_edit_at_the_end_of_a_file_without_a_newline(tree: Path) -> None:
    patch = extract_patch(block("calc/ops.py", "def g():\n    pass\n", "def g():\n    return 1\n"),
                          tree)
    assert patch.files == ("calc/ops.py",)
    assert patch.diff == (
        "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
        "@@ -3,4 +3,4 @@\n \n \n def g():\n-    pass\n\\ No newline at end of file\n"
        "+    return 1\n\\ No newline at end of file\n"
    )
    assert (tree / "calc/ops.py").read_text() == OPS  # nothing written in the tree


def test_a_diff_insertion_without_context_and_a_new_file(tree: Path) -> None:
    answer = (
        "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -2,0 +3,1 @@\n+    # checked\n"
        "--- /dev/null\n+++ b/calc/new.py\n@@ -0,0 +1,1 @@\n+X = 1\n"
    )
    patch = extract_patch(answer, tree)
    assert patch.files == ("calc/ops.py", "calc/new.py")
    assert patch.diff.endswith(
        "diff --git a/calc/new.py b/calc/new.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/calc/new.py\n@@ -0,0 +1 @@\n+X = 1\n"
    )
    assert "@@ -1,5 +1,6 @@\n def f(a, b):\n     return a / b\n+    # checked\n" in patch.diff
    assert not (tree / "calc/new.py").exists()


def test_a_later_block_without_a_path_edits_the_same_file(tree: Path) -> None:
    answer = block("calc/ops.py", "def f(a, b):\n", "def f(a, b=1):\n") + (
        "<<<<<<< SEARCH\ndef g():\n=======\ndef g() -> None:\n>>>>>>> REPLACE\n"
    )
    assert [e.path for e in parse_edits(answer)] == ["calc/ops.py", "calc/ops.py"]
    assert extract_patch(answer, tree).diff.count("diff --git") == 1


@pytest.mark.parametrize(("answer", "kind", "message"), [
    ("I would change the division.", NO_PATCH,
     "the answer holds no search/replace block and no diff"),
    ("calc/ops.py\n<<<<<<< SEARCH\ndef f(a, b):\n=======\n", NO_PATCH,
     "a search/replace block is not closed"),
    (block("calc/ops.py", "def f(a, b):\n", "def f(a, b):\n"), NO_PATCH,
     "the edits change nothing"),
    (block("calc/ops.py", "def h():\n", "def h(x):\n"), DOES_NOT_APPLY,
     "edit 1 (calc/ops.py): the SEARCH text is not in the file"),
    (block("calc/ops.py", "", "X = 1\n"), DOES_NOT_APPLY,
     "edit 1 (calc/ops.py) creates a file that exists"),
    (block("calc/gone.py", "x = 1\n", "x = 2\n"), DOES_NOT_APPLY,
     "edit 1 (calc/gone.py): the file is not in the tree"),
    ("--- a/calc/ops.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-def f(a, b):\n", DOES_NOT_APPLY,
     "the diff deletes calc/ops.py: not supported"),
    (block("/etc/passwd", "root\n", "toor\n"), UNSAFE_PATH,
     "the patch names a path outside the tree: '/etc/passwd'"),
    (block("calc/../../x.py", "", "x\n"), UNSAFE_PATH,
     "the patch names a path outside the tree: 'calc/../../x.py'"),
    (block(".git/config", "", "[core]\n"), UNSAFE_PATH,
     "the patch names a path outside the tree: '.git/config'"),
    (block("out/secret.py", "KEY = 1\n", "KEY = 2\n"), UNSAFE_PATH,
     "the patch's path 'out/secret.py' leads out of the tree"),
    (block("out/new.py", "", "x = 1\n"), UNSAFE_PATH,
     "the patch's path 'out/new.py' leads out of the tree"),
    (block("alias.py", "def g():\n", "def h():\n"), UNSAFE_PATH,
     "alias.py: not a regular file"),
])
def test_refused(tree: Path, answer: str, kind: str, message: str) -> None:
    assert refused(answer, tree) == (kind, message)


def test_git_refuses_a_path_through_a_link_inside_the_tree(tree: Path) -> None:
    kind, message = refused(block("inner/ops.py", "def g():\n", "def h():\n"), tree)
    assert kind == DOES_NOT_APPLY
    assert message == "git apply --check: error: affected file 'inner/ops.py' is beyond a " \
        "symbolic link"
    assert (tree / "calc/ops.py").read_text() == OPS
