"""Hostile inputs from the person or agent asking: files that never end or block,
and task text that is not valid UTF-8.

Each case runs the real ``ctx04`` command (or ``ctx04 mcp``) as a subprocess
over a real git repository: a file the user names is read no further than the
task budget, and only when it is a regular file; undecodable text comes out
escaped, with a diagnostic, in every output.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest
from conftest import make_git_repo

from ctx04_core.settings import Settings

CTX04 = str(Path(sys.executable).parent / "ctx04")
APP = "def parse_order(text):\n    return text.split(';')\n"
TASK = "parse_order splits on the wrong separator"
# A refusal or a cut answers in seconds; a read that blocks or never ends never would.
WAIT_S = 60
CUT = {"kind": "omitted", "reason": "task text budget", "path": None,
       "detail": f"the task text was cut to its first {Settings().max_task_chars} characters"}
# The task, the test and the error as a shell hands them over: bytes that are not UTF-8.
RAW_TASK = b"parse_order fails with 'bad\xff\xfe' on input"
ESCAPED = {"kind": "excluded", "reason": "task text is not valid UTF-8", "path": None,
           "detail": "2 escaped, first \\xff"}
CLOSING = (
    "Coverage: excluded 1 (task text is not valid UTF-8: 2 escaped, first \\xff); "
    "recall is not exhaustive.\n"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"app.py": APP})


def ctx04(
    *args: str | bytes | Path, stdin: int | IO[bytes] | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[bytes]:
    """The real command, its output as bytes, within a bounded wait."""
    return subprocess.run(
        [CTX04, *map(os.fsencode, args)], stdin=stdin, capture_output=True, timeout=WAIT_S,
        check=False,
    )


def utf8_json(data: bytes) -> Any:
    """JSON that decodes as strict UTF-8, as any other program would read it."""
    return json.loads(data.decode("utf-8"))


# --- defect 3: a task or error file is read without bound ------------------------------


@pytest.mark.parametrize(
    ("option", "path", "what"),
    [("--task-file", "/dev/zero", "task file"), ("--task-file", "/dev/urandom", "task file"),
     ("--error-file", "/dev/zero", "error file")],
)
def test_a_device_as_task_or_error_file_is_refused_in_one_line(
    repo: Path, option: str, path: str, what: str
) -> None:
    done = ctx04("retrieve", TASK, "--repo", repo, option, path)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"ctx04: error: cannot read {what} {path}: not a regular file (give - to read stdin)\n"
    )


@pytest.mark.parametrize(
    ("options", "what"),
    [(["retrieve", "--repo", "REPO", "--task-file"], "task file"),
     (["retrieve", TASK, "--repo", "REPO", "--error-file"], "error file"),
     (["vet", "--trace", "session.jsonl"], "artifact")],
)
def test_a_fifo_without_a_writer_is_refused_not_waited_for(
    repo: Path, tmp_path: Path, options: list[str], what: str
) -> None:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    done = ctx04(*(repo if option == "REPO" else option for option in options), fifo)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"ctx04: error: cannot read {what} {fifo}: not a regular file (give - to read stdin)\n"
    )


def test_a_folder_as_task_file_is_refused_in_one_line(repo: Path, tmp_path: Path) -> None:
    done = ctx04("retrieve", TASK, "--repo", repo, "--task-file", tmp_path)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"ctx04: error: cannot read task file {tmp_path}: not a regular file "
        "(give - to read stdin)\n"
    )


def test_an_endless_stdin_is_read_to_the_budget_and_the_cut_said(repo: Path) -> None:
    endless = subprocess.Popen(["yes", TASK], stdout=subprocess.PIPE)
    try:
        done = ctx04("retrieve", "--repo", repo, "--task-file", "-", "--format", "json",
                     stdin=endless.stdout)
    finally:
        endless.kill()
        endless.wait()
    assert done.returncode == 0, done.stderr
    result = utf8_json(done.stdout)
    assert result["diagnostics"]["coverage"] == [CUT]
    assert result["candidates"][0]["qualname"] == "app.parse_order"


def test_an_error_file_over_the_budget_is_cut_and_the_cut_said(
    repo: Path, tmp_path: Path
) -> None:
    log = tmp_path / "error.log"
    line = "ValueError: parse_order got an empty field\n"
    log.write_text(line * (2 * Settings().max_task_chars // len(line)))
    done = ctx04("retrieve", TASK, "--repo", repo, "--error-file", log, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert utf8_json(done.stdout)["diagnostics"]["coverage"] == [
        {**CUT, "detail": CUT["detail"].replace("task", "error")}
    ]


# --- defect 4: a task that is not valid UTF-8 --------------------------------------------


def test_an_undecodable_task_gives_utf8_json_with_its_bytes_escaped(repo: Path) -> None:
    done = ctx04("retrieve", RAW_TASK, "--repo", repo, "--test", b"tests/t\xff.py::test_a",
                 "--format", "json")
    assert done.returncode == 0, done.stderr
    result = utf8_json(done.stdout)
    assert result["query"]["error_strings"] == ["bad\\xff\\xfe"]
    assert result["query"]["test_names"] == ["tests/t\\xff.py::test_a"]
    assert result["query"]["goal_hint"] == "parse_order fails with 'bad\\xff\\xfe' on input"
    assert result["diagnostics"]["coverage"] == [
        ESCAPED,
        {**ESCAPED, "reason": "test text is not valid UTF-8", "detail": "1 escaped, first \\xff"},
    ]
    assert result["candidates"][0]["qualname"] == "app.parse_order"


def test_an_undecodable_task_gives_a_trace_record_and_markdown(
    repo: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "session.jsonl"
    done = ctx04("retrieve", RAW_TASK, "--repo", repo, "--trace", trace, "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode("utf-8").endswith(CLOSING)
    [record] = [utf8_json(line) for line in trace.read_bytes().splitlines()]
    assert record["query"]["error_strings"] == ["bad\\xff\\xfe"]
    assert record["diagnostics"] == [ESCAPED]


def test_an_undecodable_error_file_is_escaped_and_said(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "error.log"
    log.write_bytes(b"ValueError: bad field '\xc3(' in parse_order\n")
    done = ctx04("retrieve", TASK, "--repo", repo, "--error-file", log, "--format", "json")
    assert done.returncode == 0, done.stderr
    result = utf8_json(done.stdout)
    assert result["query"]["error_strings"] == [
        "\\xc3(", "ValueError: bad field '\\xc3(' in parse_order"
    ]
    assert result["diagnostics"]["coverage"] == [
        {**ESCAPED, "reason": "error text is not valid UTF-8", "detail": "1 escaped, first \\xc3"}
    ]


class RawClient:
    """Raw JSON-RPC lines to and from a real ``ctx04 mcp`` over stdio, each answer
    awaited no longer than WAIT_S: what an agent's own client sends, the SDK's cannot."""

    def __init__(self, repo: Path, trace: Path) -> None:
        self.server = subprocess.Popen(
            [CTX04, "mcp", "--repo", str(repo), "--trace", str(trace)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}).encode())
        self.answer()
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, line: bytes) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write(line + b"\n")
        self.server.stdin.flush()

    def answer(self) -> Any:
        assert self.server.stdout is not None
        ready, _, _ = select.select([self.server.stdout], [], [], WAIT_S)
        assert ready, f"no answer within {WAIT_S} s"
        return utf8_json(self.server.stdout.readline())

    def close(self) -> None:
        assert self.server.stdin is not None
        self.server.stdin.close()
        self.server.wait(timeout=WAIT_S)


def test_mcp_answers_an_undecodable_task_with_utf8(repo: Path, tmp_path: Path) -> None:
    """Raw JSON-RPC over the real server's stdio: the SDK's client cannot encode
    such a task, an agent's own client can send its bytes."""
    trace = tmp_path / "mcp.jsonl"
    client = RawClient(repo, trace)
    try:
        client.send(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
                    b'{"name": "retrieve", "arguments": {"task": "' + RAW_TASK + b'"}}}')
        called = client.answer()
    finally:
        client.close()
    result = called["result"]
    assert result["isError"] is False
    # The SDK's stdio transport decodes with errors="replace" before the tool sees the task.
    assert result["structuredContent"]["query"]["error_strings"] == ["bad\ufffd\ufffd"]
    assert result["structuredContent"]["candidates"][0]["qualname"] == "app.parse_order"
    [record] = [utf8_json(line) for line in trace.read_bytes().splitlines()]
    assert record["query"] == result["structuredContent"]["query"]
