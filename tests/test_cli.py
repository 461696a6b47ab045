"""The ``ctx04`` command as a user runs it: a real process, real exit codes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import INSTALLED_PLUGINS, SHOP, make_git_repo

CTX04 = str(Path(sys.executable).parent / "ctx04")
TASK = "Cart.total() rounds the discounted subtotal wrongly"


def ctx04(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTX04, *args], capture_output=True, text=True, check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "shop", SHOP)


def test_json_output(shop: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", str(shop), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema"] == "ctx04.context-slice.v1"
    assert data["candidates"][0]["qualname"] == "shop.cart.Cart.total"
    assert data["tokens"] <= data["budget_tokens"] == 4000


def test_markdown_is_the_slice_alone(shop: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", str(shop), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    cart = hashlib.sha256((shop / "shop/cart.py").read_bytes()).hexdigest()
    assert done.stdout.startswith(
        "## Context slice (retrieved — untrusted data)\n\n"
        f"### shop.cart.Cart.total [shop/cart.py:41-46, sha256:{cart[:12]}, "
        "apidesc, bm25, members, ripgrep]\n"
    )


def test_table_shows_ranks_and_the_slice(shop: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", str(shop), env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "shop/cart.py:41-46" in done.stdout
    assert "shop.cart.Cart.total" in done.stdout
    assert "### shop.cart.Cart.total [shop/cart.py:41-46, sha256:" in done.stdout


def test_task_and_error_from_files(shop: Path, tmp_path: Path) -> None:
    (tmp_path / "task.md").write_text("The price lookup fails for an unknown product.\n")
    (tmp_path / "error.txt").write_text(
        "Traceback (most recent call last):\n"
        '  File "shop/inventory.py", line 14, in price_of\n'
        "    return self.prices[sku]\n"
        "KeyError: 'zz-9'\n"
    )
    done = ctx04(
        "retrieve", "--task-file", str(tmp_path / "task.md"), "--error-file",
        str(tmp_path / "error.txt"), "--test", "tests/test_cart.py::test_total_with_coupon",
        "--repo", str(shop), "--format", "json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["query"]["test_names"] == ["tests/test_cart.py::test_total_with_coupon"]
    assert data["query"]["error_strings"] == [
        "shop/inventory.py", "zz-9", "Traceback (most recent call last):", "KeyError: 'zz-9'",
    ]
    top3 = [c["qualname"] for c in data["candidates"][:3]]
    assert "shop.inventory.Inventory.price_of" in top3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["retrieve", TASK, "--repo", "/nonexistent/repo"],
         "ctx04: error: repository not found: /nonexistent/repo\n"),
        (["retrieve", "   ", "--repo", "."],
         "ctx04: error: the task is empty: give the issue text, a --task-file or an "
         "--error-file\n"),
        (["retrieve", TASK, "--task-file", "/nonexistent/task.md"],
         "ctx04: error: cannot read task file /nonexistent/task.md: No such file or directory\n"),
        (["index", "--repo", "/nonexistent/repo"],
         "ctx04: error: repository not found: /nonexistent/repo\n"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = ctx04(*args)
    assert (done.returncode, done.stderr, done.stdout) == (2, message, "")


def test_a_file_is_not_a_repository(tmp_path: Path) -> None:
    (tmp_path / "file.py").write_text("x = 1\n")
    done = ctx04("retrieve", TASK, "--repo", str(tmp_path / "file.py"))
    assert (done.returncode, done.stderr) == (
        2, f"ctx04: error: repository is not a folder: {tmp_path / 'file.py'}\n",
    )


def test_an_unknown_plugin_name_is_refused(shop: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", str(shop), "--disable", "nosuch")
    assert done.returncode == 2
    assert done.stderr == (
        "ctx04: error: no installed plugin named 'nosuch'; installed: "
        + ", ".join(INSTALLED_PLUGINS) + "\n"
    )


def test_disable_by_flag_and_by_environment(shop: Path) -> None:
    by_flag = ctx04("retrieve", TASK, "--repo", str(shop), "-o", "json", "-d", "apidesc")
    by_env = ctx04("retrieve", TASK, "--repo", str(shop), "-o", "json",
                   env={"CTX04_DISABLE": "apidesc"})
    for done in (by_flag, by_env):
        data = json.loads(done.stdout)
        assert "apidesc" not in data["diagnostics"]["plugins"]
        assert all("apidesc" not in c["sources"] for c in data["candidates"])
    assert json.loads(by_flag.stdout)["candidates"] == json.loads(by_env.stdout)["candidates"]


def test_disabling_assemble_leaves_no_slice_to_build(shop: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", str(shop), "--disable", "assemble")
    assert (done.returncode, done.stderr) == (
        2, "ctx04: error: no enabled plugin implements 'assemble'; the slice cannot be built\n",
    )


def test_a_repository_without_python_files_gives_an_empty_slice(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "docs", {"README.md": "# docs only\n"})
    done = ctx04("retrieve", "where is the parser", "--repo", str(root), "-o", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["candidates"], data["diagnostics"]["index"]["files"]) == ([], 0)
    assert data["tokens"] == 24  # the header and the coverage line


def test_a_task_nothing_matches_says_so_and_what_would_help(shop: Path) -> None:
    done = ctx04("retrieve", "Improve integration efficiency", "--repo", str(shop),
                 env={"COLUMNS": "400"})
    assert done.returncode == 0, done.stderr
    assert "ctx04: 0 ranked candidates" in done.stdout
    assert done.stdout.rstrip().endswith(
        "no candidate: no name, path, error message or word of the task occurs in the "
        "repository's code; a task that names the function, file or error it is about "
        "gives recall something to find"
    )


def test_broken_files_are_reported_and_the_rest_is_retrieved(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "mixed", {
        **SHOP,
        "shop/broken.py": "def total(:\n",
        "shop/latin1.py": "name = 'caf\xe9'\n".encode("latin-1"),
        "shop/blob.py": b"\x00\x01\x02binary",
    })
    done = ctx04("retrieve", TASK, "--repo", str(root), "-o", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    failures = data["diagnostics"]["index"]["failures"]
    assert [(f["path"], f["status"]) for f in failures] == [
        ("shop/blob.py", "binary"), ("shop/broken.py", "syntax_error"),
        ("shop/latin1.py", "not_utf8"),
    ]
    assert data["candidates"][0]["qualname"] == "shop.cart.Cart.total"


def test_index_reports_and_refreshes_incrementally(shop: Path, tmp_path: Path) -> None:
    first = ctx04("index", "--repo", str(shop), "--index-dir", str(tmp_path / "idx"))
    second = ctx04("index", "--repo", str(shop), "--index-dir", str(tmp_path / "idx"))
    assert first.returncode == second.returncode == 0
    assert "indexed 6 files" in first.stdout and "6 parsed, 0 unchanged" in first.stdout
    assert "languages: python 6\n" in first.stdout
    assert "0 parsed, 6 unchanged, 0 removed" in second.stdout
    assert (tmp_path / "idx" / "index.sqlite3").is_file()


def test_plugins_lists_every_entry_point(shop: Path) -> None:
    done = ctx04("plugins", "--disable", "callgraph", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if "│" in line}
    assert sorted(rows) == INSTALLED_PLUGINS
    assert "recall" in rows["callgraph"] and rows["callgraph"].rstrip(" │").endswith("no")
    assert "ctx04-recall-ripgrep" in rows["ripgrep"] and "yes" in rows["ripgrep"]
    assert "parse_file, source_globs" in rows["python"]


def test_help_teaches_the_first_command() -> None:
    done = ctx04("--help")
    assert done.returncode == 0
    assert 'ctx04 retrieve "describe the bug or feature" --repo PATH' in done.stdout


def test_the_third_party_plugin_is_disabled_from_the_command_line(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "pinned", {
        "billing.py": "def invoice_total(lines):\n    return sum(lines)\n\n\n"
                      "def tax_rate(region):  # ctx04: pin\n    return 0.2\n",
    })
    task = "invoice_total returns the wrong sum"
    on = json.loads(ctx04("retrieve", task, "--repo", str(root), "-o", "json").stdout)
    off = json.loads(
        ctx04("retrieve", task, "--repo", str(root), "-o", "json", "--disable", "pin").stdout
    )
    assert [c["qualname"] for c in on["candidates"] if "pin" in c["sources"]] == [
        "billing.tax_rate"
    ]
    assert [c["sources"] for c in off["candidates"]] == [["apidesc", "bm25", "ripgrep"]]
    assert on["diagnostics"]["recalled"]["pin"] == 1 and "pin" not in off["diagnostics"]["recalled"]
