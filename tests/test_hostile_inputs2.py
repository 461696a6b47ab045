"""Hostile inputs, round 3: a trace file that blocks, task text that makes a
regular expression backtrack, a request the MCP SDK cannot parse.

Each case runs the real ``ctx04`` command (or ``ctx04 mcp``) as a subprocess
over a real git repository, within a bounded wait that detects a hang.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_git_repo
from ctx04_recall_traceback import frames
from test_hostile_inputs import APP, CTX04, TASK, RawClient, ctx04, utf8_json

from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"app.py": APP})


# --- C: a trace file that is a FIFO or a device ------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "trace.fifo"
    os.mkfifo(path)
    return path


def test_retrieve_refuses_a_fifo_trace_without_a_reader(repo: Path, fifo: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", repo, "--trace", fifo)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"ctx04: error: cannot write the trace {fifo}: not a regular file\n"
    )


def test_retrieve_refuses_a_fifo_trace_with_a_reader_and_writes_nothing(
    repo: Path, fifo: Path
) -> None:
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        done = ctx04("retrieve", TASK, "--repo", repo, "--trace", fifo)
        assert os.read(reader, 1) == b""
    finally:
        os.close(reader)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"ctx04: error: cannot write the trace {fifo}: not a regular file\n"
    )


def test_retrieve_refuses_a_device_as_trace(repo: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", repo, "--trace", "/dev/null")
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        "ctx04: error: cannot write the trace /dev/null: not a regular file\n"
    )


def test_mcp_refuses_a_fifo_trace_at_start(repo: Path, fifo: Path) -> None:
    done = ctx04("mcp", "--repo", repo, "--trace", fifo)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"ctx04: error: cannot write the trace {fifo}: not a regular file\n"
    )


@pytest.mark.parametrize("trace", ["FIFO", "/dev/zero"])
def test_vet_refuses_a_fifo_or_device_as_trace(tmp_path: Path, fifo: Path, trace: str) -> None:
    artifact = tmp_path / "patch.diff"
    artifact.write_text("+    return text.split(',')\n")
    path = fifo if trace == "FIFO" else Path(trace)
    done = ctx04("vet", artifact, "--trace", path)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == f"ctx04: error: {path}: cannot read trace: not a regular file\n"


# --- B: task text that makes a pattern backtrack -----------------------------------------

# A task of the full budget: its first line names the function, the rest is one
# run of characters that each pattern on the task reads (a word, a path, a frame).
NEEDLE = "parse_order splits on the wrong separator\n"
# The hang detector: the whole command answers in seconds; a quadratic
# pattern took minutes over 64 Ki characters.
LINEAR_WAIT_S = 30


def full_budget_task(run: str) -> str:
    size = Settings().max_task_chars - len(NEEDLE)
    return NEEDLE + (run * size)[:size]


@pytest.mark.parametrize(
    "run", ["a", "\0", ".", "/", "a.", "a1", "A"],
    ids=["word", "nul", "dots", "slashes", "dotted", "letter-digit", "capitals"],
)
def test_a_long_run_in_the_task_is_read_in_linear_time(
    repo: Path, tmp_path: Path, run: str
) -> None:
    task = tmp_path / "task.txt"
    task.write_text(full_budget_task(run))
    done = subprocess.run(
        [CTX04, "retrieve", "--repo", repo, "--task-file", task, "--format", "json"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=LINEAR_WAIT_S, check=False,
    )
    assert done.returncode == 0, done.stderr
    result = utf8_json(done.stdout)
    assert result["query"] == {
        "identifiers": ["parse_order"], "unresolved": [], "error_strings": [], "test_names": [],
        "file_paths": [], "goal_hint": "parse_order splits on the wrong separator",
    }
    assert result["diagnostics"]["coverage"] == []
    assert [c["qualname"] for c in result["candidates"]] == ["app.parse_order"]


def test_an_ipython_frame_without_its_marked_line_is_read_in_linear_time(
    repo: Path, tmp_path: Path
) -> None:
    """An old IPython frame's header over numbered code lines and no ``-->``
    line: each code line is read one way, not in every split of its digits."""
    task = tmp_path / "task.txt"
    header = "~/app.py in parse_order(text)\n"
    size = Settings().max_task_chars - len(NEEDLE) - len(header)
    task.write_text(NEEDLE + header + ("   1699 x\n" * size)[:size])
    done = subprocess.run(
        [CTX04, "retrieve", "--repo", repo, "--task-file", task, "--format", "json"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=LINEAR_WAIT_S, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [c["qualname"] for c in utf8_json(done.stdout)["candidates"]] == ["app.parse_order"]


def test_the_linear_patterns_take_what_they_took_on_ordinary_text() -> None:
    """Names that start after digits, inside a word at a capital, after a ``$``; test
    ids inside punctuation; paths after a ``/``: as before the patterns were bounded."""
    task = (
        "Fix 3d.plot and x$this->save() in xFoo#bar, App\\Http\\Kernel and std::vec::Vec; "
        "see (tests/test_a.py::test_b). and a::b::c, not a.py:: or ::a::b; "
        "edit src/app.py, lib/x.tsx"
    )
    query = build_query(task, names=set(), settings=Settings())
    assert query.unresolved == (
        "d.plot", "$this->save", "Foo#bar", "App\\Http\\Kernel", "std::vec::Vec",
        "py::test_b", "xFoo", "test_a", "test_b",
    )
    assert query.test_names == ("std::vec::Vec", "tests/test_a.py::test_b", "a::b::c")
    assert query.file_paths == ("tests/test_a.py", "a.py", "src/app.py", "lib/x.tsx")
    assert frames("/x/a.rb:12:in `m'\n  --> src/main.rs:10:5\n/x/a.rs:3") == [
        ("/x/a.rb", 12, "m", 12), ("src/main.rs", 10, "", 10), ("x/a.rs", 3, "", 3),
    ]


# --- A: a request the MCP SDK's parser refuses --------------------------------------------

LONE_SURROGATE_CALL = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "retrieve", '
    b'"arguments": {"task": "parse_order fails on bad \\ud800 text"}}}'
)


@pytest.fixture
def raw_client(repo: Path, tmp_path: Path) -> Iterator[RawClient]:
    client = RawClient(repo, tmp_path / "mcp.jsonl")
    yield client
    client.close()


def test_mcp_serves_a_task_with_a_lone_surrogate_escape(
    raw_client: RawClient, tmp_path: Path
) -> None:
    raw_client.send(LONE_SURROGATE_CALL)
    called = raw_client.answer()
    assert called["id"] == 1
    result = called["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["query"]["goal_hint"] == (
        "parse_order fails on bad \\ud800 text"
    )
    assert result["structuredContent"]["diagnostics"]["coverage"] == [
        {"kind": "excluded", "reason": "task text is not valid UTF-8", "path": None,
         "detail": "1 escaped, first \\ud800"}
    ]
    assert result["structuredContent"]["candidates"][0]["qualname"] == "app.parse_order"
    # The server goes on serving.
    raw_client.send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": '
                    b'{"name": "retrieve", "arguments": {"task": "' + TASK.encode() + b'"}}}')
    again = raw_client.answer()
    assert (again["id"], again["result"]["isError"]) == (2, False)
    records = [utf8_json(line) for line in (tmp_path / "mcp.jsonl").read_bytes().splitlines()]
    assert [r["query"]["goal_hint"] for r in records] == [
        "parse_order fails on bad \\ud800 text", TASK,
    ]


@pytest.mark.parametrize(
    ("line", "answer"),
    [(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "retrieve", '
      b'"arguments": {"task": "cut off',
      {"id": None, "code": -32700, "message": "Parse error: not JSON"}),
     (b'{"jsonrpc": "2.0", "id": 7, "method": "\\udc00", "params": 5}',
      {"id": 7, "code": -32600, "message": "Invalid request: not a JSON-RPC message"})],
    ids=["not-json", "not-a-message"],
)
def test_mcp_answers_a_line_it_cannot_read_with_an_error_and_goes_on(
    raw_client: RawClient, line: bytes, answer: dict[str, Any]
) -> None:
    raw_client.send(line)
    error = raw_client.answer()
    assert {"id": error["id"], **error["error"]} == answer
    raw_client.send(b'{"jsonrpc": "2.0", "id": 8, "method": "ping"}')
    assert raw_client.answer() == {"jsonrpc": "2.0", "id": 8, "result": {}}
