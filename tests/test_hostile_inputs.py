"""Hostile inputs from the person or agent asking: files that never end or block.

Each case runs the real ``ctx04`` command as a subprocess over a real git
repository: a file the user names is read no further than the task budget,
and only when it is a regular file.
"""

from __future__ import annotations

import json
import os
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
