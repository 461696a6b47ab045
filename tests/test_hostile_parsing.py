"""Hostile source text for the parsers: each case is a real repository built in a temp folder.

Every case runs the real retrieval (or the real ``ctx04`` CLI) with a task
that names a function in the hostile file, and asserts the function's exact
span and the exact lines shown for it, or the exact reason a file was not
parsed in full.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import make_git_repo

from ctx04_core import retrieve
from ctx04_core.output import retrieval_json
from ctx04_core.pipeline import Retrieval
from ctx04_core.repository import Repo
from ctx04_core.types import SliceEntry

BOM = "\ufeff"


def shown(result: Retrieval, qualname: str) -> SliceEntry:
    """The included entry of ``qualname``: its lines are ``evidence.ref``'s, its text
    exactly what the slice shows."""
    (entry,) = [
        e for e in result.context.entries
        if e.included and e.excerpt.ranked.candidate.qualname == qualname
    ]
    return entry


def lines_of(entry: SliceEntry) -> tuple[int, int]:
    return entry.evidence.ref.start_line, entry.evidence.ref.end_line


def failures(result: Retrieval) -> list[dict[str, str]]:
    failed: list[dict[str, str]] = retrieval_json(result)["diagnostics"]["index"]["failures"]
    return failed


# --- one definition of a line --------------------------------------------------------------

LEGACY = (
    '"""Legacy helpers."""\n\n\n'
    "def parse_header(line):\n"
    '    """Split a header line."""\n'
    '    return line.split(":", 1)\n'
)


def test_a_python_file_with_a_byte_order_mark_is_indexed_and_shown(tmp_path: Path) -> None:
    # Python runs such a file; ast refused it ("invalid non-printable character U+FEFF").
    root = make_git_repo(tmp_path / "repo", {"legacy.py": (BOM + LEGACY).encode("utf-8")})
    result = retrieve("parse_header returns the wrong parts", root)
    assert failures(result) == []
    assert result.candidates[0].candidate.qualname == "legacy.parse_header"
    entry = shown(result, "legacy.parse_header")
    assert lines_of(entry) == (4, 6)
    assert entry.evidence.text == (
        "def parse_header(line):\n"
        '    """Split a header line."""\n'
        '    return line.split(":", 1)\n'
    )


def test_a_javascript_file_with_a_byte_order_mark_shows_no_mark(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    text = BOM + "function parseHeader(line) {\n  return line.split(':');\n}\n"
    root = make_git_repo(tmp_path / "repo", {"app.js": text.encode("utf-8")})
    result = retrieve("parseHeader returns the wrong parts", root)
    assert failures(result) == []
    entry = shown(result, "app.parseHeader")
    assert lines_of(entry) == (1, 3)
    # The mark is no character of line 1: not shown, and no column shifted.
    assert entry.evidence.text == "function parseHeader(line) {\n  return line.split(':');\n}\n"
    (node,) = indexed(root).index.lookup("parseHeader")
    assert (node.span.start_line, node.span.end_line, node.header_end, node.signature) == (
        1, 3, 1, "function parseHeader(line)",
    )


def test_a_lone_carriage_return_ends_no_line(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    # Old Mac line endings in the head of the file: ripgrep, git and the
    # index see one line 2 where Python's tokenizer saw three, and the
    # function was indexed two lines too low, its real line 8 shown alone.
    text = (
        '"""Written on a Mac."""\r\n'
        "import os\r# one\r# two\n"
        "\n\n\n\n\n"
        "def read_config(path):\n"
        "    return os.path.exists(path)\n"
    )
    root = make_git_repo(tmp_path / "repo", {"mac.py": text.encode("utf-8")})
    result = retrieve("read_config fails", root)
    assert failures(result) == []
    entry = shown(result, "mac.read_config")
    assert lines_of(entry) == (8, 9)
    assert entry.evidence.text == "def read_config(path):\n    return os.path.exists(path)\n"
    index = indexed(root).index
    module, function = index.file_nodes("mac.py")
    assert (function.span.start_line, function.span.end_line, function.header_end) == (8, 9, 8)
    assert module.span.end_line == 9
    assert [(e.kind, e.target, e.line) for e in index.edges_from(module)] == [
        ("import", "os", 2), ("contain", "mac.read_config", 8),
    ]


def test_form_feeds_and_line_separators_inside_a_line_end_no_line(tmp_path: Path) -> None:
    # str.splitlines breaks at both; ripgrep, git, ast and tree-sitter do not.
    text = (
        'SEP = "\x0c"\n'
        'NOTE = "a\u2028b"  # \u2028 and \x0c\n'
        "\x0c\n"
        "def split_page(text):\n"
        "    return text.split(SEP)\n"
    )
    root = make_git_repo(tmp_path / "repo", {"pages.py": text})
    result = retrieve("split_page loses the last page", root)
    assert failures(result) == []
    entry = shown(result, "pages.split_page")
    assert lines_of(entry) == (4, 5)
    assert entry.evidence.text == "def split_page(text):\n    return text.split(SEP)\n"
