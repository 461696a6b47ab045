"""Hostile inputs, round 3: a trace file that blocks, task text that makes a
regular expression backtrack, a request the MCP SDK cannot parse.

Each case runs the real ``ctx04`` command (or ``ctx04 mcp``) as a subprocess
over a real git repository, within a bounded wait that detects a hang.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import make_git_repo
from test_hostile_inputs import APP, TASK, ctx04


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


@pytest.mark.parametrize("trace", ["FIFO", "/dev/zero"])
def test_vet_refuses_a_fifo_or_device_as_trace(tmp_path: Path, fifo: Path, trace: str) -> None:
    artifact = tmp_path / "patch.diff"
    artifact.write_text("+    return text.split(',')\n")
    path = fifo if trace == "FIFO" else Path(trace)
    done = ctx04("vet", artifact, "--trace", path)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == f"ctx04: error: {path}: cannot read trace: not a regular file\n"
