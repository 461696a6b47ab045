"""Comparing runs: side by side, the spec §7.4 A/B decision, the ablation verdict.

Two runs are compared over the instances both contain, so a run cut short
or restricted by ``--ids`` is compared like for like.

The §7.4 rule: the candidate wins iff at least one of recall@1/3/5, MRR,
required-file recall, required-symbol recall and line recall (the share of
the gold lines the slice shows, issue 22) strictly improves, none of
them regresses, the irrelevant-context ratio and the tokens retrieved do not
rise, and the end-to-end guards hold: resolve rate not lower, cost and
end-to-end tokens per instance at most 1.5 × current. A guard is checked
only when every compared record of both runs carries its field
(``resolved``, ``cost``, ``e2e_tokens``; ``ctx04 ab --current-e2e
--candidate-e2e`` gives them from two ``ctx04 e2e report`` files);
otherwise it is "not measured", and the decision's reason says that the
end-to-end half was not run, so a win on retrieval alone never passes silently.

Side by side (``ctx04 eval --compare``), each metric's change comes with what
tells it from chance: how many instances moved up and down, the exact sign
test of those counts, and the 95 % interval of the mean change over the
paired instances. The §7.4 rule itself reads the means, as the spec writes it.

The ablation rule: removing a plugin changes a metric beyond noise when
``|Δ| > 5 %`` of the full run's value, or ``Δ ≠ 0`` when that value is 0; a
plugin whose removal changes no metric beyond noise is to be deleted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctx04_core.bench.jsonl import json_lines
from ctx04_core.bench.metrics import METRICS, Summary, summarise
from ctx04_core.ranking.model import sure_of

RETRIEVAL = (
    "recall@1", "recall@3", "recall@5", "mrr", "required_file_recall", "required_symbol_recall",
    "line_recall",
)
NOISE = ("irrelevant_context_ratio", "tokens")
# (row name, record field, bound on candidate / current); None: must not be lower.
GUARDS: tuple[tuple[str, str, float | None], ...] = (
    ("resolve_rate", "resolved", None),
    ("cost", "cost", 1.5),
    ("e2e_tokens", "e2e_tokens", 1.5),
)
NOISE_SHARE = 0.05
# The standard normal's two-sided 95 % quantile.
Z_95 = 1.959964
NOT_MEASURED = "not measured"
# Far below any real change of a mean over instances, far above float rounding,
# so a change of exactly 5 % is within noise as the rule says.
_ROUNDING = 1e-9


class RecordsError(ValueError):
    """A records file that cannot be read; the message says which and where."""


def load_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, record in json_lines(path, RecordsError):
        if not isinstance(record, dict) or not isinstance(record.get("metrics"), dict):
            raise RecordsError(f"{path}:{number}: not a ctx04 eval record")
        missing = [m for m in METRICS if m not in record["metrics"]]
        if missing or "instance_id" not in record:
            raise RecordsError(f"{path}:{number}: record lacks {', '.join(missing) or 'its id'}")
        records.append(record)
    return records


@dataclass(frozen=True)
class Paired:
    """Two runs cut down to the instances both contain, in the first run's order."""

    a: list[dict[str, Any]]
    b: list[dict[str, Any]]
    only_a: int  # instances only the first run has
    only_b: int


def pair(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> Paired:
    b_by_id = {r["instance_id"]: r for r in b}
    common = [r for r in a if r["instance_id"] in b_by_id]
    ids = {r["instance_id"] for r in common}
    return Paired(
        a=common, b=[b_by_id[r["instance_id"]] for r in common],
        only_a=len(a) - len(common), only_b=sum(r["instance_id"] not in ids for r in b),
    )


def changes(paired: Paired, metric: str) -> list[float]:
    """Each instance's change of ``metric``, second run minus first, in order."""
    return [y["metrics"][metric] - x["metrics"][metric]
            for x, y in zip(paired.a, paired.b, strict=True)]


def moved(paired: Paired, metric: str) -> tuple[int, int]:
    """How many instances the second run scores above the first on ``metric``, and
    how many below: whether a change of the mean is many instances or a few."""
    deltas = changes(paired, metric)
    return sum(d > 0 for d in deltas), sum(d < 0 for d in deltas)


def sign_test(up: int, down: int) -> float:
    """The two-sided exact sign test of instances that moved ``up`` and ``down``:
    the chance of a split at least this uneven were either way equally likely
    (1.0 when none moved). With 100 instances a mean moves 0.01 a task, and
    one task is no trend: 5 up and 1 down is p 0.22, 6 up and none down 0.03."""
    moved_either = up + down
    if moved_either == 0:
        return 1.0
    tail = sum(math.comb(moved_either, k) for k in range(min(up, down) + 1))
    return min(1.0, 2 * tail / (1 << moved_either))


def delta_interval(paired: Paired, metric: str) -> tuple[float, float]:
    """The 95 % interval of the mean per-instance change of ``metric`` (second
    run minus first; normal approximation to the paired differences)."""
    deltas = changes(paired, metric)
    mean = sum(deltas) / len(deltas)
    if len(deltas) < 2:
        return mean, mean
    variance = sum((d - mean) ** 2 for d in deltas) / (len(deltas) - 1)
    half = Z_95 * math.sqrt(variance / len(deltas))
    return mean - half, mean + half


def in_doubt(record: dict[str, Any]) -> bool | None:
    """Whether the record's slice was in doubt, read as the prune reads it
    (``sure_of``; a record written before ``sure_margin`` was a setting had
    none: 1). None for a record whose candidates carry no probability field
    (written before it was recorded)."""
    ranked = record["ranked"]
    if any("probability" not in r for r in ranked):
        return None
    known = [r["probability"] for r in ranked if r["probability"] is not None]
    settings = record["settings"]
    return bool(known) and not sure_of(
        known, settings["doubt_probability"], settings.get("sure_margin", 1.0)
    )


@dataclass(frozen=True)
class DoubtSplit:
    """A metric's change of the mean, split by whether the slice's doubt gate
    decided alike in both runs: a ranking change moves some leaders across
    the gate, and a slice that leaves doubt shows far less, so a mean can
    move on those few slices alone. The two parts add up to the change."""

    kept: int  # instances whose slice was in doubt in both runs or in neither
    kept_delta: float  # their share of the change of the mean
    entered: int  # in doubt in the second run only
    left: int  # in doubt in the first run only
    crossed_delta: float  # the share of the change of the mean of those that crossed


def doubt_split(paired: Paired, metric: str) -> DoubtSplit | None:
    """``metric``'s change B − A split by the doubt gate; None when a record of
    either run carries no probabilities."""
    read = [(in_doubt(x), in_doubt(y)) for x, y in zip(paired.a, paired.b, strict=True)]
    states = [(a, b) for a, b in read if a is not None and b is not None]
    if not states or len(states) < len(read):
        return None
    n = len(states)
    deltas = changes(paired, metric)
    kept = [d for d, (a, b) in zip(deltas, states, strict=True) if a == b]
    return DoubtSplit(
        kept=len(kept), kept_delta=sum(kept) / n,
        entered=sum(b and not a for a, b in states),
        left=sum(a and not b for a, b in states),
        crossed_delta=(sum(deltas) - sum(kept)) / n,
    )


@dataclass(frozen=True)
class Row:
    metric: str
    current: float | None  # None: not measured
    candidate: float | None
    rule: str
    outcome: str  # improves | unchanged | regresses | rises | does not rise | holds | ...
    ok: bool  # the row does not make the candidate lose
    improves: bool

    @property
    def delta(self) -> float | None:
        if self.current is None or self.candidate is None:
            return None
        return self.candidate - self.current


@dataclass(frozen=True)
class Decision:
    rows: tuple[Row, ...]
    win: bool
    reason: str  # names the metrics that decided
    # Every end-to-end guard was checked; False: the decision rests on retrieval alone.
    e2e_measured: bool = False


# What a decision without the end-to-end half says, win or lose.
E2E_NOT_RUN = (
    "the end-to-end half was not run (resolve rate, cost, tokens unchecked): "
    "ctx04 e2e run and report, then --current-e2e and --candidate-e2e"
)


def ab_decision(paired: Paired) -> Decision:
    current, candidate = summarise(paired.a), summarise(paired.b)
    rows = [_retrieval_row(m, current.means[m], candidate.means[m]) for m in RETRIEVAL]
    rows += [_noise_row(m, current.means[m], candidate.means[m]) for m in NOISE]
    rows += [_guard_row(name, key, bound, paired) for name, key, bound in GUARDS]
    failed = [r for r in rows if not r.ok]
    improved = [r for r in rows if r.improves]
    if failed:
        reason = "; ".join(f"{r.metric} {r.outcome}" for r in failed)
    elif not improved:
        reason = "no retrieval metric strictly improves"
    else:
        reason = ", ".join(r.metric for r in improved) + " improve(s); nothing regresses or rises"
    measured = all(r.outcome != NOT_MEASURED for r in rows)
    if not measured:
        reason += f"; {E2E_NOT_RUN}"
    return Decision(tuple(rows), bool(improved) and not failed, reason, measured)


def _retrieval_row(metric: str, current: float, candidate: float) -> Row:
    rule = "must not fall; one must rise"
    if candidate > current:
        return Row(metric, current, candidate, rule, "improves", True, True)
    if candidate < current:
        return Row(metric, current, candidate, rule, "regresses", False, False)
    return Row(metric, current, candidate, rule, "unchanged", True, False)


def _noise_row(metric: str, current: float, candidate: float) -> Row:
    rises = candidate > current
    outcome = "rises" if rises else "does not rise"
    return Row(metric, current, candidate, "must not rise", outcome, not rises, False)


def _guard_row(name: str, key: str, bound: float | None, paired: Paired) -> Row:
    rule = "must not fall" if bound is None else f"at most {bound:g} × current"
    records = [*paired.a, *paired.b]
    if not paired.a or any(r.get(key) is None for r in records):
        return Row(name, None, None, rule, NOT_MEASURED, True, False)
    current = sum(float(r[key]) for r in paired.a) / len(paired.a)
    candidate = sum(float(r[key]) for r in paired.b) / len(paired.b)
    if bound is None:
        ok = candidate >= current
        return Row(name, current, candidate, rule, "holds" if ok else "regresses", ok, False)
    ok = candidate <= bound * current
    return Row(name, current, candidate, rule, "within bound" if ok else "over bound", ok, False)


def beyond_noise(full: float, ablated: float) -> bool:
    """Whether removing a step moved a metric by more than noise (the ablation rule)."""
    delta = ablated - full
    if full == 0:
        return delta != 0
    return abs(delta) > NOISE_SHARE * abs(full) + _ROUNDING


def ablation_verdict(full: Summary, ablated: Summary) -> tuple[str, list[str]]:
    """("delete" | "keep", the metrics the removal moved beyond noise)."""
    moved = [m for m in METRICS if beyond_noise(full.means[m], ablated.means[m])]
    return ("keep" if moved else "delete"), moved

