"""Materialising base commits: the tree equals the commit, missing blobs are skipped."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from bench_fixture import git
from conftest import write_files

from ctx04_core.bench.trees import TreeError, materialise, sidecar_path, tree_dir

FILES: dict[str, str | bytes] = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def f():\n    return 1\n",
    "data/blob.bin": bytes(range(256)) * 4,
    "run.sh": "#!/bin/sh\necho hi\n",
    "crlf.txt": "one\r\ntwo\r\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "src"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_files(root, FILES)
    (root / "run.sh").chmod(0o755)
    os.symlink("pkg/core.py", root / "core_link.py")
    git(root, "add", "-A")
    # A submodule is a gitlink entry; it needs no repository to be committed.
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},vendor/sub")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


def test_tree_equals_the_commit(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, commit = repo
    dest = tree_dir(tmp_path / "cache", "acme/src", commit)
    assert dest == tmp_path / "cache" / "acme__src" / commit
    tree = materialise(root / ".git", commit, dest)
    assert (tree.root, tree.missing, tree.reused) == (dest, (), False)
    found = sorted(
        str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() or p.is_symlink()
    )
    assert found == sorted([*FILES, "core_link.py"])
    for rel in FILES:
        assert (dest / rel).read_bytes() == git_bytes(root, f"{commit}:{rel}")
    assert os.readlink(dest / "core_link.py") == "pkg/core.py"
    assert (dest / "run.sh").stat().st_mode & stat.S_IXUSR
    assert not (dest / "pkg/core.py").stat().st_mode & stat.S_IXUSR
    assert not (dest / "vendor").exists()
    record = json.loads(sidecar_path(dest).read_text())
    assert record == {
        "commit": commit, "git_dir": str(root / ".git"), "files": 5, "symlinks": 1,
        "missing": [], "submodules": ["vendor/sub"], "refused": [],
    }
    assert list(dest.parent.glob(dest.name + ".tmp*")) == []


def test_missing_blob_is_skipped_and_recorded(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, commit = repo
    sha = git(root, "rev-parse", f"{commit}:pkg/core.py").strip()
    # Commits leave loose objects; deleting one is a snapshot that lacks the blob.
    (root / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    dest = tmp_path / "cache" / commit
    tree = materialise(root / ".git", commit, dest)
    assert tree.missing == ("pkg/core.py",)
    assert not (dest / "pkg/core.py").exists()
    assert (dest / "pkg/__init__.py").exists()
    assert json.loads(sidecar_path(dest).read_text())["missing"] == ["pkg/core.py"]
    again = materialise(root / ".git", commit, dest)
    assert (again.reused, again.missing) == (True, ("pkg/core.py",))


def test_a_cached_tree_is_reused_and_a_half_tree_replaced(
    repo: tuple[Path, str], tmp_path: Path
) -> None:
    root, commit = repo
    dest = tmp_path / "cache" / commit
    # What an interrupted run left: the copy of a process that is gone, and
    # one that a live worker (here, this process's parent) is still writing.
    child = subprocess.Popen(["true"])
    child.wait()  # reaped: its pid names no process now
    leftover = dest.with_name(f"{dest.name}.tmp-{child.pid}")
    busy = dest.with_name(f"{dest.name}.tmp-{os.getppid()}")
    write_files(leftover, {"stale.py": "x = 1\n"})
    write_files(busy, {"half.py": "x = 1\n"})
    first = materialise(root / ".git", commit, dest)
    assert not first.reused and not leftover.exists() and not (dest / "stale.py").exists()
    assert (busy / "half.py").exists()
    (dest / "marker").write_text("kept")
    second = materialise(root / ".git", commit, dest)
    assert second.reused and (dest / "marker").read_text() == "kept"


def test_an_unknown_commit_leaves_nothing(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, _ = repo
    dest = tmp_path / "cache" / ("f" * 40)
    with pytest.raises(TreeError, match="git ls-tree"):
        materialise(root / ".git", "f" * 40, dest)
    with pytest.raises(TreeError, match="not a commit id"):
        materialise(root / ".git", "--output=/tmp/x", tmp_path / "cache" / "bad")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def git_bytes(root: Path, spec: str) -> bytes:
    import subprocess

    return subprocess.run(
        ["git", "cat-file", "blob", spec], cwd=root, check=True, capture_output=True
    ).stdout
