"""Running many independent tasks: in this process, in local worker processes, or on Ray.

``ctx04 eval``, ``ctx04 ablate`` and ``ctx04 index --repos`` hand their work
here as one picklable function and its items; :func:`run_tasks` yields each
item's result as it finishes, so the caller decides the order it writes in.

- local, one job: each item in this process, in order.
- local, N jobs: N spawned worker processes (spawn, not fork: the parent may
  run a progress thread, and a forked child would inherit its locks).
- ray: one Ray task per item, on the cluster at ``ray_address`` (``auto``
  joins the cluster this machine belongs to) or on a local cluster that
  ``ray.init()`` starts and stops. Tasks receive paths, not file contents:
  the workers must see the same files at the same paths as this process (one
  machine, or nodes sharing a file system) and have ctx04 installed. Ray is
  the optional extra ``ctx04[ray]``, imported only here and only when chosen.

A local worker whose parent dies (``ctx04 eval`` killed) ends itself within
``ORPHAN_POLL_S``: it would otherwise run its task to the end and hold the
CPU and the index locks a later run needs.

A task whose worker process dies (killed, out of memory, a crash in native
code) is run again, at most ``WORKER_RETRIES`` times, and then reported as
:class:`WorkerLost` while the other tasks go on. An exception the task
function raises is not retried: it propagates, as it would in a loop.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor
    from types import ModuleType

Item = TypeVar("Item")
Result = TypeVar("Result")

WORKER_RETRIES = 2
ORPHAN_POLL_S = 0.5


class ExecutorKind(StrEnum):
    local = "local"
    ray = "ray"


class ExecutorError(RuntimeError):
    """The executor cannot start: Ray is not installed, or its cluster cannot be reached."""


@dataclass(frozen=True)
class Executor:
    kind: ExecutorKind = ExecutorKind.local
    jobs: int = 1  # local worker processes; 1 runs each task in this process
    ray_address: str | None = None  # None: ray.init() starts a local cluster


@dataclass(frozen=True)
class WorkerLost:
    """The worker running the task died on every attempt."""

    message: str


def run_tasks(
    executor: Executor, task: Callable[[Item], Result], items: Sequence[Item]
) -> Iterator[tuple[int, Result | WorkerLost]]:
    """(position in ``items``, ``task(item)``) for every item, in the order they finish.

    Ray is imported here, before the first result is asked for, so a caller
    learns it is missing before it opens its output.
    """
    if executor.kind is ExecutorKind.ray:
        return _on_ray(import_ray(), task, items, executor.ray_address)
    if executor.jobs <= 1:
        return ((index, task(item)) for index, item in enumerate(items))
    return _in_processes(task, items, executor.jobs)


def _in_processes(
    task: Callable[[Item], Result], items: Sequence[Item], jobs: int
) -> Iterator[tuple[int, Result | WorkerLost]]:
    """The items in a pool of ``jobs`` processes.

    A dead worker breaks the whole pool and fails every unfinished task with
    it, so the pool cannot say whose worker died. The one that did was
    running: among the first ``jobs + 1`` unfinished (the pool hands out
    tasks in submission order, one queued beyond its workers). Those few are
    run again alone, where a death is their own, ``WORKER_RETRIES`` times at
    most (the pool's run was their first attempt); the rest go to a new pool.
    """
    waiting = list(range(len(items)))
    while waiting:
        unfinished = yield from _pooled(task, items, waiting, jobs)
        suspects, waiting = unfinished[: jobs + 1], unfinished[jobs + 1 :]
        for index in suspects:
            yield index, _alone(task, items[index])


def _pooled(
    task: Callable[[Item], Result], items: Sequence[Item], chosen: list[int], jobs: int
) -> Generator[tuple[int, Result], None, list[int]]:
    """Run ``chosen`` in a new pool; returns the unfinished ones, in order, if the pool broke."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    with _pool(jobs) as pool:
        futures: dict[int, Future[Result]] = {}
        yielded: set[int] = set()
        try:
            for index in chosen:
                futures[index] = pool.submit(task, items[index])
            positions = {future: index for index, future in futures.items()}
            for future in as_completed(positions):
                result = future.result()
                yielded.add(positions[future])
                yield positions[future], result
        except BrokenProcessPool:
            unfinished = []
            for index in chosen:
                submitted = futures.get(index)
                if index in yielded:
                    continue
                if submitted is not None and submitted.exception() is None:
                    yield index, submitted.result()
                else:
                    unfinished.append(index)
            return unfinished
    return []


def _alone(task: Callable[[Item], Result], item: Item) -> Result | WorkerLost:
    from concurrent.futures.process import BrokenProcessPool

    for _ in range(WORKER_RETRIES):
        with _pool(1) as pool:
            try:
                return pool.submit(task, item).result()
            except BrokenProcessPool:
                continue
    return _lost()


def _pool(jobs: int) -> ProcessPoolExecutor:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
        initializer=_end_with_parent, initargs=(os.getpid(),),
    )


def _end_with_parent(parent: int) -> None:
    """In a worker: a daemon thread that ends the process once ``parent`` has died.

    An orphan is adopted by another process, so its parent id changes; polling
    it works wherever processes have parents (a death signal is Linux-only,
    and fires when the spawning *thread* ends).
    """
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="ctx04-orphan-watch", daemon=True).start()


@contextlib.contextmanager
def session(executor: Executor) -> Iterator[None]:
    """One Ray connection (or local cluster) for every :func:`run_tasks` inside,
    so a command with several runs (ablate) starts or joins the cluster once.
    Nothing to do for a local executor, nor when Ray is already initialised
    (an API caller's own cluster, left running)."""
    if executor.kind is not ExecutorKind.ray:
        yield
        return
    ray = import_ray()
    if ray.is_initialized():
        yield
        return
    _init(ray, executor.ray_address)
    # Ray's driver prints the workers' deaths on stdout, where the caller's
    # results go, until it shuts down; they belong with the progress, on stderr.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            yield
        finally:
            ray.shutdown()


def _init(ray: ModuleType, address: str | None) -> None:
    import logging

    from ctx04_core.plugins import DISABLE_ENV

    # The plugins a task loads: a worker on another node must use the
    # driver's choice, not its own environment's.
    env = {DISABLE_ENV: os.environ.get(DISABLE_ENV, "")}
    try:
        ray.init(
            address=address, runtime_env={"env_vars": env}, include_dashboard=False,
            log_to_driver=False, logging_level=logging.WARNING,
        )
    except (ConnectionError, ValueError, RuntimeError) as err:
        where = f"at {address}" if address else "on this machine"
        first = (str(err).strip().splitlines() or [""])[0]
        raise ExecutorError(f"cannot start or reach a Ray cluster {where}: {first}") from err


def _on_ray(
    ray: ModuleType, task: Callable[[Item], Result], items: Sequence[Item], address: str | None
) -> Iterator[tuple[int, Result | WorkerLost]]:
    with session(Executor(ExecutorKind.ray, ray_address=address)):
        yield from _ray_tasks(ray, task, items)


def _ray_tasks(
    ray: ModuleType, task: Callable[[Item], Result], items: Sequence[Item]
) -> Iterator[tuple[int, Result | WorkerLost]]:
    # Only system failures (a dead worker or node) are retried: the default
    # retry_exceptions=False lets the task's own exceptions through at once.
    remote = ray.remote(num_cpus=1, max_retries=WORKER_RETRIES)(_apply)
    shared = ray.put(task)
    positions: dict[Any, int] = {remote.remote(shared, item): i for i, item in enumerate(items)}
    lost = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
            ray.exceptions.OutOfMemoryError)
    pending = list(positions)
    try:
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                try:
                    yield positions[ref], ray.get(ref)
                except lost as err:
                    first = (str(err).strip().splitlines() or [""])[0]
                    yield positions[ref], _lost(f"{type(err).__name__}: {first}")
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


def _lost(detail: str = "") -> WorkerLost:
    attempts = f"the worker process died on each of {1 + WORKER_RETRIES} attempts"
    return WorkerLost(f"{attempts} ({detail})" if detail else attempts)


def _apply(task: Callable[[Item], Result], item: Item) -> Result:
    return task(item)


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as err:
        raise ExecutorError(
            "--executor ray needs Ray, which is not installed: pip install 'ctx04[ray]'"
        ) from err
    return ray
