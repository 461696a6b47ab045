"""Placing the candidates no signal can weigh (``Recall.placed``).

A recall plugin may know something of the repository rather than of the
task: the changelog most of its fixes also update (the ``history``
plugin). No signal scores such a file against the task, and a model never
saw one, so fusion would put it anywhere; it is placed instead, as the
``placed_file_position``-th file of the ranking: after the files the task's
evidence leads to, where a reader of the first few files still meets it.

It is named there, not shown, and it moves nothing: the prune plans the
slice over the ranking without it (its lines are no evidence for the task,
and the prune's rules read ranks), and the excerpts are renumbered after.

So is the leading file's module (its own lines: imports, constants,
module-level statements), as the ``leading_module_rank``-th candidate when
the ranking does not hold it before: a fix changes a file's module-level
lines as well as its functions in a quarter to a third of the tasks (an
import it needs, a constant), and no task's words lift those lines; a
module the ranking holds further down moves up to that place. Past the
fifth place and up to the module's, a class or module of a file a
better-ranked candidate already holds (not the leader's) then comes after
the rest: read as its members, it would push the rest out of a reader's
first ten, and no file changes its place. When the containers before the
module would still push it past a reader's first ``leading_module_rank``
definitions, it moves up to the latest place where the reader meets it
there, never into the first five: a class of another file ranked ninth is
read as its thirty methods, and the module tenth after it as the fortieth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ctx04_core.settings import Settings
from ctx04_core.types import CONTAINER_KINDS, MODULE, Candidate, Excerpt, RankedCandidate

# The places a reader meets first, and recall@k counts, keep their order.
KEPT_PLACES = 5


@dataclass(frozen=True)
class Placement:
    """The ranking with the placed candidates in, renumbered; the ranks the
    placed candidates took, ascending; and each ranked candidate's new rank,
    by its old rank (the first at index 0)."""

    ranked: tuple[RankedCandidate, ...]
    placed_ranks: tuple[int, ...]
    new_ranks: tuple[int, ...]

    def renumbered(self, excerpt: Excerpt) -> Excerpt:
        """The excerpt with its candidate's rank once the placed ones are in (the
        reserve's, the head's and the references' ranks, past the ranking's,
        follow it: one more for each placed candidate)."""
        rank = excerpt.ranked.rank
        if rank <= len(self.new_ranks):
            rank = self.new_ranks[rank - 1]
        else:
            rank += len(self.placed_ranks)
        return replace(excerpt, ranked=replace(excerpt.ranked, rank=rank))


def _nothing_within(candidate: Candidate) -> tuple[str, ...]:
    return ()


def place(
    ranked: Sequence[RankedCandidate], placed: Sequence[Candidate], settings: Settings,
    leading_module: Candidate | None = None,
    within: Callable[[Candidate], Sequence[str]] = _nothing_within,
) -> Placement:
    """``ranked`` with each ``placed`` candidate whose file it does not hold
    before the first candidate of its ``placed_file_position``-th file (last
    when it has fewer files), then ``leading_module`` (the first candidate's
    file's module) as its ``leading_module_rank``-th candidate unless it is
    ranked before or fewer candidates come before, or earlier where the
    containers before it, each read with the definitions ``within`` it (their
    qualified names), would push it past that many definitions read; every
    rank renumbered."""
    # Each entry: the candidate's index in ``ranked``, None for a placed one.
    order: list[tuple[int | None, RankedCandidate]] = list(enumerate(ranked))
    for candidate in placed if settings.placed_file_position else ():
        if not any(r.candidate.span.path == candidate.span.path for _, r in order):
            at_file = _file_start([r for _, r in order], settings.placed_file_position)
            order.insert(at_file, (None, RankedCandidate(candidate, 0, 0.0)))
    at = settings.leading_module_rank - 1
    # A ranking shorter than that ends where the evidence ends: nothing past it.
    if leading_module is not None and 0 <= at <= len(order):
        now = next(
            (i for i, (_, r) in enumerate(order) if _same_module(r.candidate, leading_module)),
            None,
        )
        if now is None:
            order.insert(at, (None, RankedCandidate(leading_module, 0, 0.0)))
        elif now > at:
            order.insert(at, order.pop(now))
        order[KEPT_PLACES:at + 1] = _containers_last(order, KEPT_PLACES, at + 1,
                                                     leading_module.span.path)
        _met_within_reading(order, leading_module, at + 1, within)
    new_ranks = [0] * len(ranked)
    for rank, (old, _) in enumerate(order, start=1):
        if old is not None:
            new_ranks[old] = rank
    return Placement(
        tuple(replace(r, rank=rank) for rank, (_, r) in enumerate(order, start=1)),
        tuple(rank for rank, (old, _) in enumerate(order, start=1) if old is None),
        tuple(new_ranks),
    )


def _containers_last(
    order: Sequence[tuple[int | None, RankedCandidate]], start: int, stop: int, leader: str
) -> list[tuple[int | None, RankedCandidate]]:
    """``order[start:stop]`` with the classes and modules of files other than
    ``leader`` that a better-ranked candidate's file already is moved after
    the rest, each group in its order: read as its members, such a container
    pushes the rest (the leading module among them) out of a reader's first
    ten, and a file met before keeps every file's place."""
    met = {r.candidate.span.path for _, r in order[:start]}
    kept: list[tuple[int | None, RankedCandidate]] = []
    last: list[tuple[int | None, RankedCandidate]] = []
    for entry in order[start:stop]:
        candidate = entry[1].candidate
        later = (candidate.kind in CONTAINER_KINDS and candidate.span.path != leader
                 and candidate.span.path in met)
        (last if later else kept).append(entry)
        met.add(candidate.span.path)
    return kept + last


def _met_within_reading(
    order: list[tuple[int | None, RankedCandidate]], module: Candidate, reach: int,
    within: Callable[[Candidate], Sequence[str]],
) -> None:
    """Moves ``module`` up in ``order``, not into the first ``KEPT_PLACES``, to
    the latest place where a reader meets it within ``reach`` distinct
    definitions, reading each candidate and, after a container, the
    definitions ``within`` it; where it is met there already, or nowhere past
    the kept places, it stays."""
    now = next(i for i, (_, r) in enumerate(order) if _same_module(r.candidate, module))
    read: dict[tuple[str, str | None], None] = {}
    read_before = []
    for _, entry in order[:now]:
        read_before.append(len(read))
        candidate = entry.candidate
        path = candidate.span.path
        read.setdefault((path, candidate.qualname))
        if candidate.kind in CONTAINER_KINDS:
            read.update(dict.fromkeys((path, name) for name in within(candidate)))
    read_before.append(len(read))
    met = [i for i in range(KEPT_PLACES, now + 1) if read_before[i] < reach]
    if met and met[-1] < now:
        order.insert(met[-1], order.pop(now))


def _same_module(candidate: Candidate, module: Candidate) -> bool:
    return candidate.kind == MODULE and candidate.span.path == module.span.path


def _file_start(order: Sequence[RankedCandidate], position: int) -> int:
    """The index of the first candidate of the ``position``-th distinct file."""
    files: set[str] = set()
    for i, item in enumerate(order):
        if item.candidate.span.path not in files:
            files.add(item.candidate.span.path)
            if len(files) == position:
                return i
    return len(order)
