"""Hostile source text for the parsers: each case is a real repository built in a temp folder.

Every case runs the real retrieval (or the real ``ctx04`` CLI) with a task
that names a function in the hostile file, and asserts the function's exact
span and the exact lines shown for it, or the exact reason a file was not
parsed in full.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
from conftest import make_git_repo
from ctx04_dependence import scope_statements
from mcp_types import CallToolResult
from test_mcp_server import CTX04, stdio_session, text_of

from ctx04_core import retrieve
from ctx04_core.output import retrieval_json
from ctx04_core.pipeline import Retrieval
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Diagnostic, SliceEntry

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
    # With the three lines above it (first_run_context): line 1 shows no mark.
    assert lines_of(entry) == (1, 6)
    assert entry.evidence.text == (
        '"""Legacy helpers."""\n\n\n'
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
    # With the three (blank) lines above it (first_run_context).
    assert lines_of(entry) == (5, 9)
    assert entry.evidence.text == (
        "\n\n\ndef read_config(path):\n    return os.path.exists(path)\n"
    )
    index = indexed(root).index
    module, function = index.file_nodes("mac.py")
    assert (function.span.start_line, function.span.end_line, function.header_end) == (8, 9, 8)
    assert module.span.end_line == 9
    assert [(e.kind, e.target, e.line) for e in index.edges_from(module)] == [
        ("import", "os", 2), ("contain", "mac.read_config", 8),
    ]


def test_statement_dependence_numbers_lines_as_the_index_does() -> None:
    # The dependence plugin parses a shown file again, through the same ast renumbering.
    text = "x = 1\ry = x\n\ndef f():\n    return y\n"
    statements = scope_statements("lone-cr", text, None)
    assert [(s.first, s.last, sorted(s.writes)) for s in statements] == [
        (1, 1, ["x"]), (1, 1, ["y"]), (3, 4, ["f"]),
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
    # With the three lines above it (first_run_context), each one line.
    assert lines_of(entry) == (1, 5)
    assert entry.evidence.text == (
        'SEP = "\x0c"\nNOTE = "a\u2028b"  # \u2028 and \x0c\n\x0c\n'
        "def split_page(text):\n    return text.split(SEP)\n"
    )


# --- what parsing one file may cost ---------------------------------------------------------

NESTING = 20_000  # blocks nested in one function: 40,000 levels of syntax tree
DEEP_JS = "function deep() {\n" + "{" * NESTING + "}" * NESTING + "\n}\n"
DEEP_RS = "fn deep() {\n" + "{" * NESTING + "}" * NESTING + "\n}\n"
TALLY_JS = "function tallyVotes(ballots) {\n  return ballots.length;\n}\n"
TALLY_RS = "pub fn tally_seats(votes: u32) -> u32 {\n    votes / 2\n}\n"
TOO_DEEP = "nested deeper than 4096 levels at line 2"
# Bounds the wait for a hang (the nested files took minutes), not the speed.
ANSWERS_WITHIN_S = 60


def ctx04(*args: str, cache: Path) -> str:
    """Run the real ``ctx04`` CLI; its output, or a failure when it does not answer in time."""
    done = subprocess.run(
        [CTX04, *args], capture_output=True, text=True, check=False, timeout=ANSWERS_WITHIN_S,
        env={**os.environ, "XDG_CACHE_HOME": str(cache), "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_deeply_nested_files_are_not_parsed_and_the_rest_is(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", {
        "deep.js": DEEP_JS, "deep.rs": DEEP_RS, "tally.js": TALLY_JS, "tally.rs": TALLY_RS,
    })
    cache = tmp_path / "cache"
    indexed = ctx04("index", "--repo", str(root), cache=cache).splitlines()
    assert indexed[1:4] == [
        "languages: javascript 1, rust 1",
        f"  too_complex deep.js: {TOO_DEEP}",
        f"  too_complex deep.rs: {TOO_DEEP}",
    ]
    assert indexed[0].endswith(" s: 4 parsed, 0 unchanged, 0 removed; 4 nodes, 2 edges, "
                               "2 not parsed in full")
    document = json.loads(ctx04(
        "retrieve", "tallyVotes miscounts the ballots", "--repo", str(root), "-o", "json",
        cache=cache,
    ))
    assert document["diagnostics"]["index"]["failures"] == [
        {"path": "deep.js", "status": "too_complex", "message": TOO_DEEP},
        {"path": "deep.rs", "status": "too_complex", "message": TOO_DEEP},
    ]
    assert document["diagnostics"]["coverage"] == [
        {"kind": "omitted", "reason": "parse budget", "path": path, "detail": TOO_DEEP}
        for path in ("deep.js", "deep.rs")
    ]
    first = document["candidates"][0]
    assert (first["qualname"], first["path"], first["start_line"], first["end_line"]) == (
        "tally.tallyVotes", "tally.js", 1, 3,
    )
    assert first["text"].endswith(f"]\n{TALLY_JS}\n")
    rust = retrieve("tally_seats halves the votes", root)
    assert shown(rust, "tally.tally_seats").evidence.text == TALLY_RS
    assert rust.context.text.endswith(
        "Coverage: omitted 2 (deep.js: parse budget, deep.rs: parse budget); "
        "recall is not exhaustive.\n"
    )


def test_a_file_not_parsed_by_the_deadline_is_reported(tmp_path: Path) -> None:
    # A deadline of 0 s has passed before any parser looks at a file: both
    # parsers give up, with the deadline's reason, and the file is still
    # searched and shown as lines.
    root = make_git_repo(tmp_path / "repo", {"tally.js": TALLY_JS, "legacy.py": LEGACY})
    result = retrieve("parse_header returns the wrong parts", root,
                      settings=Settings(parse_deadline_s=0.0))
    late = "not parsed within the 0 s parse deadline"
    assert failures(result) == [
        {"path": "legacy.py", "status": "too_complex", "message": late},
        {"path": "tally.js", "status": "too_complex", "message": late},
    ]
    assert result.diagnostics == (
        Diagnostic("omitted", "parse budget", "legacy.py", late),
        Diagnostic("omitted", "parse budget", "tally.js", late),
    )
    assert [(e.evidence.ref.path, e.included) for e in result.context.entries] == [
        ("legacy.py", True),
    ]
    assert result.candidates[0].candidate.qualname is None  # lines, not a definition


def test_the_mcp_server_reports_a_nested_file_as_the_cli_does(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", {"deep.rs": DEEP_RS, "tally.rs": TALLY_RS}).resolve()
    task = "tally_seats halves the votes"

    async def calls() -> tuple[CallToolResult, CallToolResult]:
        with anyio.fail_after(ANSWERS_WITHIN_S):
            async with stdio_session(root, tmp_path / "server-cache") as session:
                index = await session.call_tool("index", {})
                return index, await session.call_tool("retrieve", {"task": task})

    index, retrieved = anyio.run(calls)
    assert index.structured_content is not None
    assert index.structured_content["failures"] == [
        {"path": "deep.rs", "status": "too_complex", "message": TOO_DEEP},
    ]
    assert retrieved.structured_content is not None
    assert retrieved.structured_content["diagnostics"]["coverage"] == [
        {"kind": "omitted", "reason": "parse budget", "path": "deep.rs", "detail": TOO_DEEP},
    ]
    assert text_of(retrieved) == ctx04(
        "retrieve", task, "--repo", str(root), "--format", "markdown", cache=tmp_path / "cache"
    )
