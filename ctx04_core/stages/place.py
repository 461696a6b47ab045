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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Excerpt, RankedCandidate


@dataclass(frozen=True)
class Placement:
    """The ranking with the placed candidates in, renumbered, and the ranks the
    placed candidates took, ascending."""

    ranked: tuple[RankedCandidate, ...]
    placed_ranks: tuple[int, ...]

    def renumbered(self, excerpt: Excerpt) -> Excerpt:
        """The excerpt with its candidate's rank once the placed ones are in: one
        more for each placed candidate at or before it (the reserve's, the
        head's and the references' ranks follow the ranking's)."""
        rank = excerpt.ranked.rank
        for placed in self.placed_ranks:
            if placed <= rank:
                rank += 1
        return replace(excerpt, ranked=replace(excerpt.ranked, rank=rank))


def place(
    ranked: Sequence[RankedCandidate], placed: Sequence[Candidate], settings: Settings
) -> Placement:
    """``ranked`` with each ``placed`` candidate whose file it does not hold
    before the first candidate of its ``placed_file_position``-th file (last
    when it has fewer files), every rank renumbered."""
    order = list(ranked)
    added: list[Candidate] = []
    for candidate in placed if settings.placed_file_position else ():
        if not any(r.candidate.span.path == candidate.span.path for r in order):
            order.insert(_file_start(order, settings.placed_file_position),
                         RankedCandidate(candidate, 0, 0.0))
            added.append(candidate)
    renumbered = tuple(replace(r, rank=rank) for rank, r in enumerate(order, start=1))
    # No ranked candidate equals an added one: none shares its file.
    return Placement(renumbered, tuple(r.rank for r in renumbered if r.candidate in added))


def _file_start(order: Sequence[RankedCandidate], position: int) -> int:
    """The index of the first candidate of the ``position``-th distinct file."""
    files: set[str] = set()
    for i, item in enumerate(order):
        if item.candidate.span.path not in files:
            files.add(item.candidate.span.path)
            if len(files) == position:
                return i
    return len(order)
