"""A repository's history, config and trees are data: none of them may make
ctx04 write a file or run a program (issue 26, defects 1 and 11).

Each case is a real git repository made in a temp folder and read by the
installed ``ctx04`` (CLI and ``ctx04 mcp``); the assertions are on the file
system.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import GIT_ENV, SHOP, make_git_repo, write_files
from ctx04_history import parse_show, read_log
from test_mcp_server import call_once

from ctx04_core.bench.trees import materialise, sidecar_path
from ctx04_core.settings import Settings

CTX04 = str(Path(sys.executable).parent / "ctx04")
TASK = "Cart.total() rounds the discounted subtotal wrongly"


def git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=root, env=GIT_ENV, input=stdin,
                          capture_output=True, check=True)
    return done.stdout.decode().strip()


def commit_verbatim(root: Path, files: dict[str, str | bytes], message: str) -> str:
    """Commit ``files`` with ``message`` kept byte for byte."""
    write_files(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-q", "--cleanup=verbatim", "-F", "-", stdin=message.encode())
    return git(root, "rev-parse", "HEAD")


def forging_message(target: Path) -> str:
    """A message holding the history plugin's former record and field marks:
    read with them, it became three more commits whose "ids" are options that
    make ``git show`` write ``target``."""
    fake = "Cart total rounds the discounted subtotal wrongly"
    return (
        "Round the cart total\n\n"
        f"\x1e--output={target}\x1f{fake}\x1f\n"
        f"\x1e--format=tformat:written by a commit message\x1f{fake}\x1f\n"
        f"\x1e-s\x1f{fake}\x1f\n"
    )


def ctx04(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {"XDG_CACHE_HOME": str(cache), "PATH": os.environ["PATH"]}
    return subprocess.run([CTX04, *args], capture_output=True, text=True, env=env, check=False)


def forged_shop(tmp_path: Path) -> tuple[Path, Path]:
    """The shop with one commit whose message forges records, and the file
    those records would make git write."""
    root = make_git_repo(tmp_path / "shop", SHOP)
    target = tmp_path / "outside" / "written.txt"
    target.parent.mkdir()
    commit_verbatim(root, {"shop/cart.py": SHOP["shop/cart.py"] + "\n# rounded\n"},
                    forging_message(target))
    return root, target


def test_a_commit_message_cannot_make_retrieve_write_a_file(tmp_path: Path) -> None:
    root, target = forged_shop(tmp_path)
    done = ctx04("retrieve", TASK, "--repo", str(root), "--format", "json", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not target.exists()
    assert sorted(os.listdir(target.parent)) == []
    ranked = json.loads(done.stdout)["candidates"]
    assert ranked[0]["qualname"] == "shop.cart.Cart.total"


def test_a_commit_message_cannot_make_the_mcp_server_write_a_file(tmp_path: Path) -> None:
    root, target = forged_shop(tmp_path)
    [result] = call_once(root.resolve(), tmp_path / "server-cache", [("retrieve", {"task": TASK})])
    assert not result.is_error
    assert not target.exists()


def test_a_message_with_the_marks_of_a_record_is_one_commit(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", SHOP)
    message = forging_message(tmp_path / "x") + "\n\x1e" + "a" * 40 + "\n"
    sha = commit_verbatim(root, {"shop/cart.py": SHOP["shop/cart.py"] + "\n# rounded\n"},
                          message)
    log = read_log(root, Settings())
    assert [c.sha for c in log.commits] == git(root, "rev-list", "HEAD").split("\n")
    assert log.commits[0].sha == sha
    assert log.commits[0].message == message.strip()
    assert log.commits[0].files == ("shop/cart.py",)
    assert log.trouble is None


def test_a_changed_line_cannot_pass_for_a_record_or_a_hunk() -> None:
    real, other = "1" * 40, "2" * 40
    shown = (
        f"\x1e{real}\n\ndiff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n"
        "@@ -3,2 +3,3 @@ def parse(text):\n"
        f"-\x1e{other}\n--- a/evil.py\n+\x1e{other}\n+++ b/evil.py\n+@@ -1 +1 @@ def forged():\n"
        "@@ -9 +10 @@ class Reader:\n-    x = 1\n\\ No newline at end of file\n+    x = 2\n"
    )
    assert parse_show(shown, {real, other}) == {real: (("m.py", "parse"), ("m.py", "Reader"))}


def hostile_config(root: Path, marker: Path) -> None:
    """Config keys and attributes that each name a program, and a signed
    commit so that ``log.showSignature`` has a signature to check."""
    program = root.parent / "program.sh"
    program.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\ncat\n", encoding="utf-8")
    program.chmod(0o755)
    write_files(root, {".gitattributes": "*.py diff=evil\n"})
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Cart total rounding: treat .py with the evil driver")
    head = git(root, "rev-parse", "HEAD")
    signed = (
        f"tree {git(root, 'rev-parse', 'HEAD^{tree}')}\nparent {head}\n"
        "author t <t@example.com> 1767225600 +0000\n"
        "committer t <t@example.com> 1767225600 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n"
        "\nCart total rounds the discounted subtotal, signed\n"
    )
    sha = git(root, "hash-object", "-t", "commit", "-w", "--stdin", stdin=signed.encode())
    git(root, "update-ref", "HEAD", sha)
    # Last: the fixture's own git commands would run the programs.
    for key, value in (
        ("log.showSignature", "true"), ("gpg.program", str(program)),
        ("diff.evil.textconv", str(program)), ("diff.evil.command", str(program)),
        ("diff.external", str(program)), ("core.fsmonitor", str(program)),
        ("core.pager", str(program)), ("core.hooksPath", str(root.parent)),
    ):
        git(root, "config", key, value)


def test_a_hostile_git_config_runs_no_program(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo" / "shop", SHOP)
    commit_verbatim(root, {"shop/cart.py": SHOP["shop/cart.py"] + "\n# rounded\n"},
                    "Cart total rounds the discounted subtotal wrongly")
    marker = tmp_path / "ran.txt"
    hostile_config(root, marker)
    done = ctx04("retrieve", TASK, "--repo", str(root), "--format", "json", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    # The history was still read: the commits that changed cart.py vote for it.
    ranked = json.loads(done.stdout)["candidates"]
    assert ranked[0]["qualname"] == "shop.cart.Cart.total"
    assert ranked[0]["signals"]["history"] == 1.0


def crafted_tree_repo(root: Path, outside: Path) -> Path:
    """A git directory whose HEAD tree holds a link ``a`` to ``outside``, a
    folder ``a`` with ``evil.txt`` (git's own commands never write such a
    tree, but an object store may hold one) and an ordinary ``ok.py``."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    link = git(root, "hash-object", "-w", "--stdin", stdin=str(outside).encode())
    evil = git(root, "hash-object", "-w", "--stdin", stdin=b"written through a link\n")
    ok = git(root, "hash-object", "-w", "--stdin", stdin=b"def ok():\n    return 1\n")
    folder = git(root, "mktree", stdin=f"100644 blob {evil}\tevil.txt\n".encode())
    tree = git(root, "mktree", stdin=(
        f"120000 blob {link}\ta\n040000 tree {folder}\ta\n100644 blob {ok}\tok.py\n"
    ).encode())
    head = git(root, "commit-tree", tree, "-m", "crafted")
    git(root, "update-ref", "refs/heads/main", head)
    return root / ".git"


def test_a_tree_entry_below_a_link_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    git_dir = crafted_tree_repo(tmp_path / "crafted", outside)
    commit = git(git_dir.parent, "rev-parse", "HEAD")
    tree = materialise(git_dir, commit, tmp_path / "trees" / commit)
    assert os.listdir(outside) == []
    assert sorted(os.listdir(tree.root)) == ["a", "ok.py"]
    assert os.readlink(tree.root / "a") == str(outside)
    record = json.loads(sidecar_path(tree.root).read_text(encoding="utf-8"))
    assert (record["files"], record["symlinks"], record["refused"]) == (1, 1, ["a/evil.txt"])


def test_index_repos_writes_nothing_outside_its_tree_cache(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    git_dir = crafted_tree_repo(tmp_path / "crafted", outside)
    repos = tmp_path / "repos.json"
    repos.write_text(json.dumps({"evil/tree": str(git_dir)}), encoding="utf-8")
    done = ctx04("index", "--repos", str(repos), cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert os.listdir(outside) == []
