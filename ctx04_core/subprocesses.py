"""Running a child (git, rg) with a deadline and bounded output.

A child that overruns is killed with its whole process group: killing only
the direct child would leave a grandchild (a ``git`` wrapper's ``sleep``)
holding the pipe open, and reading would wait for it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

_READ_CHUNK = 64 * 1024
MAX_STDERR_BYTES = 16 * 1024

Stopped = Literal["timeout", "output_limit", "enough"]


@dataclass(frozen=True)
class ChildResult:
    returncode: int | None  # None when the child was stopped
    stdout: bytes
    stderr: bytes  # at most MAX_STDERR_BYTES
    stopped: Stopped | None

    def first_error_line(self) -> str:
        lines = self.stderr.decode("utf-8", "replace").strip().splitlines()
        return lines[0] if lines else f"exit status {self.returncode}"


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    max_stdout_bytes: int,
    consume: Callable[[bytes], bool] | None = None,
    env: Mapping[str, str] | None = None,
) -> ChildResult:
    """Run ``argv``, reading its output as it comes, and stop it when it overruns.

    The child is stopped at the deadline (``"timeout"``), when its output
    passes ``max_stdout_bytes`` (``"output_limit"``), or when ``consume``
    says the output so far answers the question (``"enough"``). What was
    read before the stop is returned in ``stdout``; with ``consume`` it is
    handed over instead, chunk by chunk as it arrives, and not kept (the
    result's ``stdout`` is empty). ``env`` replaces the environment when
    given. Raises OSError when it cannot start.
    """
    deadline = time.monotonic() + timeout_s
    out, err = bytearray(), bytearray()
    with subprocess.Popen(
        list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True, env=env,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None  # both are PIPE
        try:
            stopped = _pump(proc.stdout.fileno(), proc.stderr.fileno(), err, deadline,
                            max_stdout_bytes, consume or _keep(out))
            if stopped is None:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    stopped = "timeout"  # it closed its output but did not exit
        except BaseException:
            _kill_group(proc)
            raise
        if stopped is not None:
            _kill_group(proc)
        proc.wait()
    return ChildResult(None if stopped else proc.returncode, bytes(out), bytes(err), stopped)


def _keep(out: bytearray) -> Callable[[bytes], bool]:
    """A consumer that keeps every chunk in ``out`` and never has enough."""

    def keep(chunk: bytes) -> bool:
        out.extend(chunk)
        return False

    return keep


def _pump(
    out_fd: int, err_fd: int, err: bytearray, deadline: float, max_stdout_bytes: int,
    consume: Callable[[bytes], bool],
) -> Stopped | None:
    """Read both pipes until EOF, or return why reading stopped early."""
    read = 0
    with selectors.DefaultSelector() as selector:
        selector.register(out_fd, selectors.EVENT_READ)
        selector.register(err_fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                elif key.fd == err_fd:
                    err += chunk[: max(0, MAX_STDERR_BYTES - len(err))]
                else:
                    over = read + len(chunk) > max_stdout_bytes
                    if over:
                        chunk = chunk[: max_stdout_bytes - read]
                    read += len(chunk)
                    if consume(chunk):
                        return "enough"
                    if over:
                        return "output_limit"
    return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it had already exited
        os.killpg(proc.pid, signal.SIGKILL)
