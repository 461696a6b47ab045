"""The training table: benchmark records of the candidate pool as feature rows
with labels from the gold patch.

A pool record is what ``ctx04 eval --set top_k=N`` writes for a task: the
fused ranking cut to N, each candidate with its span, kind, recall sources,
terms, hit lines and signal values, beside the task's gold (files, lines,
symbols from the old side of the patch). The rows come from
:func:`ctx04_core.ranking.features.feature_rows`, the same function the fuse
stage calls, so what the model is fitted on is what it reads at retrieval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctx04_core.bench.gold import Gold
from ctx04_core.ranking.features import feature_rows
from ctx04_core.types import CONTAINER_KINDS, Candidate, Span


@dataclass(frozen=True)
class Labels:
    """What the gold says of one candidate."""

    # A container (class, module) holds a changed line only when the line is
    # its own (a base class, an import), not a member's: crediting a module
    # with every change inside it taught the model to rank modules first.
    holds_gold_line: bool
    is_gold_symbol: bool
    in_gold_file: bool


@dataclass(frozen=True)
class TaskRows:
    """One task's pool as the learned ranking sees it."""

    instance_id: str
    repo: str
    candidates: tuple[Candidate, ...]
    rows: tuple[tuple[float, ...], ...]
    labels: tuple[Labels, ...]
    gold: Gold  # what the labels were read from; the CV scores orders against it


def pool_of(
    record: Mapping[str, Any],
) -> tuple[list[Candidate], dict[str, list[float]], list[float]]:
    """The record's candidates, each signal's values and the weighted scores."""
    candidates: list[Candidate] = []
    signals: dict[str, list[float]] = {}
    weighted: list[float] = []
    # A placed candidate (the running changelog) was never scored: it has no
    # signal, and the model never ranks it.
    items = [item for item in record["ranked"] if item["signals"]]
    names = sorted({name for item in items for name in item["signals"]})
    for name in names:
        signals[name] = [float(item["signals"].get(name, 0.0)) for item in items]
    for item in items:
        candidates.append(Candidate(
            Span(item["path"], item["start_line"], item["end_line"]),
            item["kind"], item["qualname"], tuple(item.get("sources", ())),
            tuple(item.get("terms", ())), tuple(item.get("hit_lines", ())),
        ))
        weighted.append(float(item["score"]))
    return candidates, signals, weighted


def task_rows(record: Mapping[str, Any], task_text: str) -> TaskRows | None:
    """The record's pool as feature rows and labels; None for a failed task or
    one without gold lines."""
    if record.get("error") or not record.get("gold") or not record["gold"].get("lines"):
        return None
    gold = Gold.from_json(record["gold"])
    candidates, signals, weighted = pool_of(record)
    rows = feature_rows(task_text, candidates, signals, weighted)
    symbols = {s.key for s in gold.symbols}
    labels = tuple(
        Labels(
            bool(changed_lines_held(gold, c.span, c.kind, c.qualname)),
            (c.span.path, c.qualname) in symbols,
            c.span.path in gold.files,
        )
        for c in candidates
    )
    return TaskRows(
        record["instance_id"], record["repo"], tuple(candidates), tuple(rows), labels, gold
    )


def changed_lines_held(gold: Gold, span: Span, kind: str, qualname: str | None) -> list[int]:
    """The gold's changed lines a candidate holds as the slice shows it: a
    function or method those in its span, a class or module only its own
    (those its region as a gold symbol holds), not its members'."""
    own = [run for s in gold.symbols if s.key == (span.path, qualname) for run in s.region]
    return [
        n for n in gold.lines.get(span.path, ())
        if span.start_line <= n <= span.end_line
        and (kind not in CONTAINER_KINDS or any(a <= n <= b for a, b in own))
    ]
