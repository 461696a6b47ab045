"""The forked processes a large refresh parses in, sharing nothing else with their parent.

A worker is forked from whatever process refreshes: ``ctx04 index``, or a
``ctx04 mcp`` server whose event loop owns the SIGTERM and SIGINT handlers
and a signal wake-up descriptor, whose stdin and stdout carry the protocol,
and which holds the index's writer lock. A fork inherits all of that. A
SIGTERM sent to a worker (``multiprocessing.Pool`` closed its workers so)
was written into the server's wake-up descriptor and stopped the server; a
worker left behind by a server that exited kept the lock's open file, and
so the lock, for as long as it lived. So each worker drops all of it before
its first task, and dies with its parent. (A forked worker already ends
with ``os._exit``: the parent's exit handlers never run in it.)
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TypeVar

Task = TypeVar("Task")
Answer = TypeVar("Answer")

# The signals a parent may handle itself: a server's event loop does.
_PARENT_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
# Linux's prctl option asking the kernel to send a signal when the parent dies.
PR_SET_PDEATHSIG = 1
# Two tasks sent each worker at a time: it computes one while its answer to the
# other is read. Tasks are small, so sending never waits on a full pipe.
TASKS_PER_WORKER = 2

# The descriptors of the lock files this process holds (or is about to lock).
_lock_fds: set[int] = set()


@contextmanager
def not_inherited(fd: int) -> Iterator[None]:
    """While in the block, every worker forked closes its copy of ``fd``.

    For a lock file: ``flock`` belongs to the open file, which a fork
    shares, so a worker's copy would hold the lock after the parent let go.
    Registered before the lock is taken and dropped before the file is
    closed, so a worker never closes a descriptor number reused since.
    """
    _lock_fds.add(fd)
    try:
        yield
    finally:
        _lock_fds.discard(fd)


class WorkerFailed(Exception):
    """A worker gave no answer in time, or ended without one; the message says which."""


def forked_map(
    work: Callable[[Task], Answer],
    tasks: Sequence[Task],
    processes: int,
    timeout_s: float,
    ahead: int,
) -> Generator[Answer, None, None]:
    """``work(task)`` of each task, in order, computed in ``processes`` forked workers.

    Each worker has a pipe of its own each way, so no lock is shared:
    ``multiprocessing.Pool`` shares its queues' locks, and a pool closed
    while a worker wrote a large answer waited for ever on the rest of it.
    Here closing kills the workers and drops their pipes. ``work`` is handed
    over by the fork, never pickled. At most ``ahead`` tasks past the one
    awaited are started, bounding the answers held. Raises
    :class:`WorkerFailed` when the awaited answer has not come within
    ``timeout_s`` or a worker ended.
    """
    workers: list[tuple[BaseProcess, Connection, Connection]] = []
    try:
        # Inside the try: a fork that fails still kills the workers forked before it.
        for _ in range(processes):
            workers.append(_fork(work))
        # Per worker, the tasks sent it, in the order its answers will come.
        sent: dict[Connection, deque[int]] = {answers: deque() for _, _, answers in workers}
        answered: dict[int, Answer] = {}
        started = 0
        for awaited in range(len(tasks)):
            deadline = time.monotonic() + timeout_s
            while awaited not in answered:
                last = min(len(tasks), awaited + ahead + 1)
                for process, task_writer, answers in workers:
                    while len(sent[answers]) < TASKS_PER_WORKER and started < last:
                        try:
                            task_writer.send(tasks[started])
                        except BrokenPipeError:  # it ended between tasks
                            raise _ended(process) from None
                        sent[answers].append(started)
                        started += 1
                busy = [answers for answers, tasks_sent in sent.items() if tasks_sent]
                ready = wait(busy, max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise WorkerFailed(f"gave no answer within {timeout_s:g} s")
                for reader in ready:
                    assert isinstance(reader, Connection)
                    try:
                        answered[sent[reader].popleft()] = reader.recv()
                    except EOFError:
                        (process,) = [p for p, _, a in workers if a is reader]
                        raise _ended(process) from None
            yield answered.pop(awaited)
    finally:
        for process, task_writer, answers in workers:
            process.kill()
            process.join()
            task_writer.close()
            answers.close()


def _ended(process: BaseProcess) -> WorkerFailed:
    """What a worker that ended without an answer is reported as."""
    process.join()
    code = process.exitcode or 0
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    return WorkerFailed(f"ended without an answer ({how})")


def _fork(work: Callable[[Task], Answer]) -> tuple[BaseProcess, Connection, Connection]:
    """A started worker, and this process's ends of its two pipes."""
    context = multiprocessing.get_context("fork")
    task_reader, task_writer = context.Pipe(duplex=False)
    answer_reader, answer_writer = context.Pipe(duplex=False)
    process = context.Process(
        target=_serve, args=(os.getpid(), work, task_reader, answer_writer), daemon=True
    )
    # Blocked across the fork, so no signal reaches the worker while it
    # still has its parent's handlers; the worker unblocks them.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _PARENT_SIGNALS)
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    # The worker's ends live in the worker alone, so its death reads here as
    # the end of its answers.
    task_reader.close()
    answer_writer.close()
    return process, task_writer, answer_reader


def _serve(
    parent: int, work: Callable[[Task], Answer], tasks: Connection, answers: Connection
) -> None:
    """A worker's life: cut loose from its parent, then each task in and its answer
    out, until it is killed or its parent dies."""
    _started(parent)
    while True:
        answers.send(work(tasks.recv()))


def _started(parent: int) -> None:
    """In a new worker: its own signal handling, no stdio, no lock, and death with
    ``parent``."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Ctrl-C reaches the whole process group; the parent answers it by
    # killing its workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _PARENT_SIGNALS)
    _die_with(parent)
    devnull = os.open(os.devnull, os.O_RDWR)
    for stdio in (0, 1):
        os.dup2(devnull, stdio)
    os.close(devnull)
    for fd in _lock_fds:
        os.close(fd)


def _die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` ends (Linux; elsewhere the
    killing at the end of the refresh is all). The kernel watches the thread
    that forked, the refresh's own, which kills its workers before it ends."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the request was made
        os._exit(1)
