"""Where a run's slices miss the gold lines, and what each rank's shown lines hold.

Two readings of the records ``ctx04 eval --out`` writes (``ctx04 gaps``),
for deciding what to work on next:

- **Places.** Each gold line counts once, in the first place that holds it:
  shown by the slice; held by the first candidate; by a candidate ranked
  2-5; by one ranked past 5; inside a ranked class or module only, in a
  member of it that no candidate is; in a file the slice shows but no
  candidate's span; in a file some candidate is in but the slice does not
  show; in a file no candidate is in. A candidate holds a line in its span,
  but a class or module (``CONTAINER_KINDS``) only a line of its own (one
  whose gold symbol it is), not a line of a function or method inside it:
  the slice shows such a container as its own lines, so a change in its
  member is the ranking's or recall's to find, not the slice's
  (``ranking.table.changed_lines_held``, the learned ranking's labels' rule;
  a record without candidates' kinds reads every span as held). An
  instance's shares sum to 1 (to 0 when it failed or has no gold line) and
  are averaged over the instances, as line recall is: the "shown" share is
  the run's line recall. A gold line held by a leading candidate that the
  slice does not show is the slice's to win; one in no candidate's file is
  recall's.
- **By rank.** The slice's shown lines grouped by the rank of the candidate
  they show, then by what the slice added beside its candidates (the
  reserve's functions, the leading file's head, the signatures of called
  definitions; lines of no candidate in records older than that field):
  lines per instance; the share of them that is irrelevant, counted as the
  irrelevant-context ratio counts a line (pooled over the group's lines, not
  averaged per instance); and the line recall they give, each gold line to
  the best-ranked group that shows it, so the column sums to the line recall.
  It needs records that give each shown part its candidate's rank (from
  ``ctx04 eval`` after that field was added); older records give no table.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctx04_core.bench.gold import Gold
from ctx04_core.bench.metrics import EXTRAS, relevant_lines
from ctx04_core.ranking.table import changed_lines_held
from ctx04_core.types import Span

PLACES = (
    "shown", "first candidate", "ranks 2-5", "past rank 5", "member of a ranked container",
    "shown file, no candidate", "ranked file, not shown", "no candidate's file",
)
# Rank groups of shown lines, best first: (name, first rank, last rank).
RANK_GROUPS = (
    ("1", 1, 1), ("2-3", 2, 3), ("4-5", 4, 5), ("6-10", 6, 10), ("11-20", 11, 20),
    ("past 20", 21, None),
)
NO_CANDIDATE = "no candidate"
Line = tuple[str, int]


def places(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each place's share of the gold lines, averaged over ``records`` (0 when there are none)."""
    totals: defaultdict[str, float] = defaultdict(float)
    for record in records:
        gold = _gold_lines(record)
        if gold:
            where = _Places(record)
            for line in gold:
                totals[where.first(line)] += 1 / len(gold)
    return {place: totals[place] / len(records) if records else 0.0 for place in PLACES}


@dataclass(frozen=True)
class RankGroup:
    """One group's shown lines over a run."""

    name: str
    lines_per_instance: float
    irrelevant: float | None  # None when the group shows no line
    line_recall: float


def by_rank(records: Sequence[Mapping[str, Any]]) -> list[RankGroup] | None:
    """The shown lines by rank group (the groups of :data:`RANK_GROUPS`, then of
    ``metrics.EXTRAS``, then lines of no candidate that name no extra); None
    when a shown part of the records lacks its rank."""
    if any("rank" not in part for record in records for part in record["shown"]):
        return None
    names = [name for name, _, _ in RANK_GROUPS] + list(EXTRAS) + [NO_CANDIDATE]
    position = {name: i for i, name in enumerate(names)}
    lines: Counter[str] = Counter()
    irrelevant: Counter[str] = Counter()
    recall: defaultdict[str, float] = defaultdict(float)
    for record in records:
        gold = _gold_lines(record)
        relevant = relevant_lines(Gold.from_json(record["gold"])) if record["gold"] else {}
        credited: dict[Line, int] = {}
        for part in record["shown"]:
            group = _group(part["rank"], part.get("extra"))
            keep = relevant.get(part["path"], frozenset())
            for number in _numbers(part):
                lines[group] += 1
                irrelevant[group] += number not in keep
                line = (part["path"], number)
                if line in gold:
                    credited[line] = min(credited.get(line, len(names)), position[group])
        for best in credited.values():
            recall[names[best]] += 1 / len(gold)
    count = len(records)
    return [
        RankGroup(
            name, lines[name] / count if count else 0.0,
            irrelevant[name] / lines[name] if lines[name] else None,
            recall[name] / count if count else 0.0,
        )
        for name in names
    ]


def _gold_lines(record: Mapping[str, Any]) -> set[Line]:
    gold = record.get("gold")
    if not gold:
        return set()
    return {(path, n) for path, numbers in gold["lines"].items() for n in numbers}


def _numbers(part: Mapping[str, Any]) -> list[int]:
    """A shown part's line numbers (records keep them as inclusive runs)."""
    return [n for first, last in part["lines"] for n in range(first, last + 1)]


class _Places:
    """Where a record's slice and ranking hold a line."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.shown = {(part["path"], n) for part in record["shown"] for n in _numbers(part)}
        self.shown_files = {part["path"] for part in record["shown"]}
        self.ranked = sorted(record["ranked"], key=lambda r: r["rank"])
        self.ranked_files = {r["path"] for r in self.ranked}
        self.gold = Gold.from_json(record["gold"])

    def first(self, line: Line) -> str:
        """The first of :data:`PLACES` that holds ``line``."""
        if line in self.shown:
            return "shown"
        path, number = line
        spans = [r for r in self.ranked
                 if r["path"] == path and r["start_line"] <= number <= r["end_line"]]
        # As the labels of the learned ranking read it: a class or module
        # holds only its own changed lines.
        best = next((
            r["rank"] for r in spans
            if number in changed_lines_held(self.gold, Span(path, r["start_line"], r["end_line"]),
                                            r.get("kind", ""), r.get("qualname"))
        ), None)
        if best is not None:
            return "first candidate" if best == 1 else "ranks 2-5" if best <= 5 else "past rank 5"
        if spans:
            return "member of a ranked container"
        if path in self.shown_files:
            return "shown file, no candidate"
        if path in self.ranked_files:
            return "ranked file, not shown"
        return "no candidate's file"


def _group(rank: int | None, extra: str | None) -> str:
    if rank is None:
        return extra if extra in EXTRAS else NO_CANDIDATE
    for name, first, last in RANK_GROUPS:
        if first <= rank and (last is None or rank <= last):
            return name
    raise ValueError(f"rank {rank} is not a candidate's rank")
