"""The forked processes a large refresh parses in, sharing nothing else with their parent.

A worker is forked from whatever process refreshes: ``ctx04 index``, or a
``ctx04 mcp`` server whose event loop owns the SIGTERM and SIGINT handlers
and a signal wake-up descriptor, whose stdin and stdout carry the protocol,
and which holds the index's writer lock. A fork inherits all of that. The
SIGTERM a pool sends its workers when it closes was written into the
server's wake-up descriptor and stopped the server; a worker left behind by
a server that exited kept the lock's open file, and so the lock, for as long
as it lived. So each worker drops all of it before its first task, and dies
with its parent. (A forked worker already ends with ``os._exit``: the
parent's exit handlers never run in it.)
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.pool
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# The signals a parent may handle itself: a server's event loop does.
_PARENT_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
# Linux's prctl option asking the kernel to send a signal when the parent dies.
PR_SET_PDEATHSIG = 1

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


def forked_pool(
    processes: int, initializer: Callable[..., None], initargs: tuple[Any, ...]
) -> multiprocessing.pool.Pool:
    """A pool of ``processes`` forked workers, each cut loose by :func:`_started`
    and then set up by ``initializer(*initargs)`` (handed over by the fork, not pickled)."""
    # Blocked across the forks (the pool's own threads, which fork any
    # replacement worker, keep them blocked), so no signal reaches a worker
    # while it still has its parent's handlers; the worker unblocks them.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _PARENT_SIGNALS)
    try:
        return multiprocessing.get_context("fork").Pool(
            processes, initializer=_started, initargs=(os.getpid(), initializer, initargs)
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _started(
    parent: int, initializer: Callable[..., None], initargs: tuple[Any, ...]
) -> None:
    """In a new worker: its own signal handling, no stdio, no lock, and death with
    ``parent``; then the caller's set-up."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # how the pool ends its workers
    # Ctrl-C reaches the whole process group; the parent answers it by
    # closing the pool, which a worker dying on its own would hang.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _PARENT_SIGNALS)
    _die_with(parent)
    devnull = os.open(os.devnull, os.O_RDWR)
    for stdio in (0, 1):
        os.dup2(devnull, stdio)
    os.close(devnull)
    for fd in _lock_fds:
        os.close(fd)
    initializer(*initargs)


def _die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` ends (Linux; elsewhere the
    pool's closing at the end of the refresh is all). The kernel watches the
    thread that forked, which is the refresh's own or the pool's: both outlive
    the pool."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the request was made
        os._exit(1)
