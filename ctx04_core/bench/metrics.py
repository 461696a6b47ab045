"""Scoring one system's answer for one instance against its gold, and summarising a run.

Definitions (per instance; a run's value is the mean over its instances):

- ``file_acc@k`` (k = 1, 5, 10; SweRank/LocAgent style): 1 when every gold
  file is among the first k distinct files of the ranked list, in rank order.
- ``function_acc@k`` (k = 5, 10): 1 when every gold symbol is among the
  first k distinct symbols of the ranked list.
- ``function_acc_read@k`` (k = 5, 10): the same, with the ranked list read
  the way an agent reads it: a class (or other type) or module candidate
  stands for itself and then every definition inside it, in line order, so
  a 400-line module at rank 2 has not pointed at one of its functions.
- ``recall@k`` (k = 1, 3, 5): the share of gold symbols that are the symbol
  of one of the first k candidates.
- ``mrr``: 1 / rank of the first candidate whose symbol is a gold symbol, 0 if none.
- ``required_file_recall`` / ``required_symbol_recall``: the share of gold
  files / symbols that are the file / symbol of an included (shown) candidate.
- ``line_recall``: the share of gold lines (over all gold files) that the
  slice shows; 0 when the gold has no line.
- ``line_recall@k`` (k = 1, 3, 5): the share of gold lines inside the whole
  span of one of the first k candidates: what the ranking offers a slice.
- ``irrelevant_context_ratio``: the share of the slice's shown lines that
  are in no gold symbol's region and farther than ``NEAR_LINES`` lines from
  every gold line of the same file (a line of a file with no gold is
  irrelevant). A line shown twice counts twice. A slice showing no line
  scores 1.0: nothing relevant was shown, and an empty slice must not look
  like a clean one.
- ``tokens``: the slice's token count.

Function-level localisation once the file is right: over a run, the mean
``function_acc@k`` of the instances whose ``file_acc@5`` is 1
(``function_acc@k|file@5``; None when there are none).

A candidate's symbol is ``(path, qualname)``; a candidate without a
qualname (lines of a file that does not parse) stands for the file itself,
``(path, None)``, which only a file that does not parse has as gold symbol.
An instance that failed (no tree, no gold, the system raised) counts as a
retrieval that returned nothing: every metric 0 and the ratio 1.0.

Wall time is summarised over the instances that did not fail, as p50 and
p95 by the nearest-rank rule (the ceil(p/100 · n)-th smallest value), and
the index build time as the median and the total of the per-instance index
refresh seconds.

When the records carry the instances' ``language``, a run is also summarised
per language, the same way over each language's instances.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctx04_core.bench.gold import Gold
from ctx04_core.types import CONTAINER_KINDS

NEAR_LINES = 15
FILE_ACC_KS = (1, 5, 10)
FUNCTION_ACC_KS = (5, 10)
RECALL_KS = (1, 3, 5)
LINE_RECALL_KS = (1, 3, 5)

# Every metric, in the order tables show them.
METRICS = (
    *(f"file_acc@{k}" for k in FILE_ACC_KS),
    *(f"function_acc@{k}" for k in FUNCTION_ACC_KS),
    *(f"function_acc_read@{k}" for k in FUNCTION_ACC_KS),
    *(f"recall@{k}" for k in RECALL_KS),
    "mrr",
    "required_file_recall",
    "required_symbol_recall",
    "line_recall",
    *(f"line_recall@{k}" for k in LINE_RECALL_KS),
    "irrelevant_context_ratio",
    "tokens",
)
LOWER_IS_BETTER = frozenset({"irrelevant_context_ratio", "tokens"})
FAILED: dict[str, float] = {m: 1.0 if m == "irrelevant_context_ratio" else 0.0 for m in METRICS}

Symbol = tuple[str, str | None]
# The definitions inside a container candidate, as (path, qualname), in line order.
Covered = Callable[["RankedItem"], Sequence[Symbol]]


@dataclass(frozen=True)
class RankedItem:
    """One ranked candidate as a system returned it."""

    rank: int
    path: str
    start_line: int
    end_line: int
    qualname: str | None
    kind: str
    included: bool  # shown in the slice
    score: float = 0.0  # the fused score the system ranked by
    signals: tuple[tuple[str, float], ...] = ()  # each ranking signal's value, by name
    sources: tuple[str, ...] = ()  # the recall sources that proposed it
    terms: tuple[str, ...] = ()  # the query terms that led to it
    hit_lines: tuple[int, ...] = ()  # the lines a recall source pointed at
    # The score the learned order ranked by (the shipped logistic model's
    # log-odds that the candidate holds a changed line); None when the
    # weighted fusion or another system ranked.
    model_score: float | None = None
    # The model's own probability that the candidate holds a changed line
    # (from its log-odds, before any signal it does not read): what the
    # slice's doubt gate reads. None when no model ranked the candidate.
    probability: float | None = None

    @property
    def symbol(self) -> Symbol:
        return (self.path, self.qualname)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "path": self.path, "qualname": self.qualname,
            "start_line": self.start_line, "end_line": self.end_line, "kind": self.kind,
            "included": self.included,
            "score": round(self.score, 6),
            "signals": {name: round(value, 6) for name, value in self.signals},
            "sources": list(self.sources),
            "terms": list(self.terms),
            "hit_lines": list(self.hit_lines),
            "model_score": None if self.model_score is None else round(self.model_score, 6),
            "probability": None if self.probability is None else round(self.probability, 6),
        }


# What a slice shows beside its candidates: the learned order's functions past
# top_k in a slice in doubt, the leading file's head, the signatures of
# definitions the shown lines call.
EXTRAS = ("reserve", "head", "called")


@dataclass(frozen=True)
class Shown:
    """The line numbers the slice shows of one included candidate."""

    path: str
    lines: tuple[int, ...]
    rank: int | None = None  # its candidate's rank; None: lines of no candidate
    # For lines of no candidate, what the slice added them as (``EXTRAS``).
    extra: str | None = None


@dataclass(frozen=True)
class Answer:
    """What a system returned for one instance."""

    ranked: tuple[RankedItem, ...]
    shown: tuple[Shown, ...]
    tokens: int
    seconds: float
    index_seconds: float | None  # the code index refresh, when the system has one
    # The decision door's call (whether it ranked, why not, tokens, seconds,
    # cost), when the system has a door enabled.
    door: dict[str, Any] | None = None
    # (reason, detail) of each "unavailable" diagnostic of the retrieval: a
    # search cut short by a deadline is why one run's order may differ from
    # another's.
    unavailable: tuple[tuple[str, str], ...] = ()


def score(gold: Gold, answer: Answer, covered: Covered) -> dict[str, float]:
    """Every metric of one instance; ``covered`` gives the definitions inside
    a container candidate (see ``function_acc_read@k``)."""
    ranked = sorted(answer.ranked, key=lambda r: r.rank)
    gold_symbols = {s.key for s in gold.symbols}
    read = reading_order(ranked, covered)
    included = [r for r in ranked if r.included]
    values = ranking_metrics(gold, ranked)
    for k in FUNCTION_ACC_KS:
        values[f"function_acc_read@{k}"] = float(gold_symbols <= set(read[:k]))
    values["required_file_recall"] = share(set(gold.files), {r.path for r in included})
    values["required_symbol_recall"] = share(gold_symbols, {r.symbol for r in included})
    values["line_recall"] = line_recall(
        gold, ((part.path, n) for part in answer.shown for n in part.lines)
    )
    values["irrelevant_context_ratio"] = irrelevant_ratio(gold, answer.shown)
    values["tokens"] = float(answer.tokens)
    return {m: values[m] for m in METRICS}


def ranking_metrics(
    gold: Gold, ranked: Sequence[RankedItem], line_ks: Sequence[int] = LINE_RECALL_KS
) -> dict[str, float]:
    """The metrics that read the ranked list alone, in rank order: file Acc@k,
    function Acc@k, recall@k, MRR and ``line_recall@k`` for each of ``line_ks``
    (the learned ranking's cross-validation reads a ranking with these too)."""
    gold_files = set(gold.files)
    gold_symbols = {s.key for s in gold.symbols}
    files = _distinct(r.path for r in ranked)
    symbols = _distinct(r.symbol for r in ranked)
    values: dict[str, float] = {}
    for k in FILE_ACC_KS:
        values[f"file_acc@{k}"] = float(gold_files <= set(files[:k]))
    for k in FUNCTION_ACC_KS:
        values[f"function_acc@{k}"] = float(gold_symbols <= set(symbols[:k]))
    for k in RECALL_KS:
        values[f"recall@{k}"] = share(gold_symbols, {r.symbol for r in ranked[:k]})
    first = next((r.rank for r in ranked if r.symbol in gold_symbols), None)
    values["mrr"] = 1.0 / first if first else 0.0
    for k in line_ks:
        values[f"line_recall@{k}"] = line_recall(gold, (
            (r.path, n) for r in ranked[:k] for n in range(r.start_line, r.end_line + 1)
        ))
    return values


def reading_order(ranked: Sequence[RankedItem], covered: Covered) -> list[Symbol]:
    """The distinct symbols of ``ranked`` (in rank order) as an agent reads
    them: each container candidate followed by the definitions inside it."""
    read: list[Symbol] = []
    for item in ranked:
        read.append(item.symbol)
        if item.kind in CONTAINER_KINDS:
            read.extend(covered(item))
    return _distinct(read)


def line_recall(gold: Gold, seen: Iterable[tuple[str, int]]) -> float:
    """The share of the gold lines among ``seen`` (path, line number) pairs."""
    wanted = {(path, n) for path, numbers in gold.lines.items() for n in numbers}
    return len(wanted & set(seen)) / len(wanted) if wanted else 0.0


def irrelevant_ratio(gold: Gold, shown: Iterable[Shown]) -> float:
    relevant = relevant_lines(gold)
    total = irrelevant = 0
    for part in shown:
        keep = relevant.get(part.path, frozenset())
        total += len(part.lines)
        irrelevant += sum(line not in keep for line in part.lines)
    return irrelevant / total if total else 1.0


def relevant_lines(gold: Gold) -> dict[str, frozenset[int]]:
    """Per file, the lines a shown line must be among not to count as irrelevant."""
    relevant: dict[str, set[int]] = {}
    for symbol in gold.symbols:
        lines = relevant.setdefault(symbol.path, set())
        for start, end in symbol.region:
            lines.update(range(start, end + 1))
    for path, numbers in gold.lines.items():
        lines = relevant.setdefault(path, set())
        for n in numbers:
            lines.update(range(max(1, n - NEAR_LINES), n + NEAR_LINES + 1))
    return {path: frozenset(lines) for path, lines in relevant.items()}


def _distinct(items: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


def share(gold: set[Any], found: set[Any]) -> float:
    """The share of ``gold`` in ``found``; 0 when there is no gold."""
    return len(gold & found) / len(gold) if gold else 0.0


@dataclass(frozen=True)
class Summary:
    instances: int
    errors: int
    # Per reason (a deadline's "timeout", a cap's "truncated", a "ranking
    # model" that could not be read), the instances whose retrieval reported it.
    unavailable: dict[str, int]
    means: dict[str, float]  # every metric's mean over the instances
    seconds_p50: float | None  # wall time per instance, over those that did not fail
    seconds_p95: float | None
    index_seconds_median: float | None
    index_seconds_total: float | None
    # function_acc@k over the instances whose gold files are all in the top 5
    given_file: dict[str, float | None]
    given_file_instances: int


GIVEN_FILE = "file_acc@5"
GIVEN_FILE_METRICS = {f"function_acc@{k}|file@5": f"function_acc@{k}" for k in FUNCTION_ACC_KS}


def summarise(records: Sequence[Mapping[str, Any]]) -> Summary:
    """A run's summary from its per-instance records (as ``ctx04 eval --out`` writes them)."""
    means = {
        m: statistics.fmean(float(r["metrics"][m]) for r in records) if records else 0.0
        for m in METRICS
    }
    ok = [r for r in records if not r.get("error")]
    seconds = sorted(float(r["seconds"]) for r in ok if r.get("seconds") is not None)
    index = [float(r["index_seconds"]) for r in ok if r.get("index_seconds") is not None]
    located = [r for r in records if float(r["metrics"][GIVEN_FILE]) == 1.0]
    given_file = {
        name: statistics.fmean(float(r["metrics"][m]) for r in located) if located else None
        for name, m in GIVEN_FILE_METRICS.items()
    }
    return Summary(
        instances=len(records),
        errors=len(records) - len(ok),
        unavailable=dict(sorted(Counter(
            reason for r in records for reason in {u["reason"] for u in r.get("unavailable", ())}
        ).items())),
        means=means,
        seconds_p50=nearest_rank(seconds, 50),
        seconds_p95=nearest_rank(seconds, 95),
        index_seconds_median=statistics.median(index) if index else None,
        index_seconds_total=sum(index) if index else None,
        given_file=given_file,
        given_file_instances=len(located),
    )


UNLABELLED = "(none)"  # the group of records without a language, in a run where others have one


def summarise_by_language(records: Sequence[Mapping[str, Any]]) -> dict[str, Summary]:
    """Each language's summary, by language name; empty when no record names a language."""
    return {language: summarise(group) for language, group in by_language(records).items()}


def by_language(records: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The records of each language, in language order (records without one
    under ``UNLABELLED``); empty when no record names a language."""
    if not any(r.get("language") for r in records):
        return {}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(record.get("language") or UNLABELLED, []).append(record)
    return {language: groups[language] for language in sorted(groups)}


def nearest_rank(ordered: Sequence[float], percent: float) -> float | None:
    """The nearest-rank percentile of sorted values: the ceil(p/100 · n)-th smallest."""
    if not ordered:
        return None
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]
