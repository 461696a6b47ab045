"""The features the learned ranking reads of each candidate in the pool.

One row per merged candidate, the same at retrieval time (the fuse stage)
and at training time (``ctx04 train``, from a benchmark record of the pool),
so a model fitted on one reads the other. No feature names a path, a name or
a repository: a candidate is described by what the stages measured of it
(each signal's value, its rank under that signal, its share of the pool's
best), its structure (kind, length, the pool's other candidates inside it
or around it, a test file), its file's standing in the pool, and facts of
the task text. A ranker that learns from those can carry to repositories it
never saw; one that learned a path could not.

Ranks are absolute (``log2(1 + rank)``), not shares of the pool: training
reads a pool cut to its best few hundred, retrieval the whole of it.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from ctx04_core.paths import is_test_path
from ctx04_core.types import Candidate

# The signals of the bundled plugins, in name order: each gives three features.
# A signal not listed here (a third party's) is not read by the model; fuse
# adds its weighted value to the model's score.
KNOWN_SIGNALS = (
    "auxiliary", "bm25", "definition", "history", "history_definition", "neighbour", "path",
    "pointed_at", "tested",
)
# The recall sources the shipped model was fitted with, in name order. A
# source not listed here (the call graph's later ``callees``, a third
# party's) counts only in the candidate's number of sources.
KNOWN_SOURCES = (
    "apidesc", "bm25", "callgraph", "history", "members", "ripgrep", "tests", "traceback",
)
KINDS = ("function", "method", "class", "module", "lines")
# The pool a model reads: the weighted fusion's first POOL candidates. The
# training records keep that many (``ctx04 eval --set top_k=POOL``), and the
# fuse stage reorders that many, so features read the same set in both.
POOL = 300

_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s+File \"", re.MULTILINE)
_PATH_LIKE = re.compile(r"[\w\-.]+/[\w\-./]*\.\w{1,5}\b")
_TEST_WORD = re.compile(r"\btest", re.IGNORECASE)


def _signal_features() -> tuple[str, ...]:
    return tuple(
        f"{name}.{part}" for name in KNOWN_SIGNALS for part in ("value", "share", "log_rank")
    )


FEATURES: tuple[str, ...] = (
    *_signal_features(),
    "weighted.share", "weighted.log_rank",
    *(f"kind.{kind}" for kind in KINDS),
    "log_lines", "log_hit_lines", "terms", "terms.share",
    *(f"source.{source}" for source in KNOWN_SOURCES),
    "sources",
    "test_file",
    "inner_candidates", "has_outer_candidate",
    "file.share", "file.log_rank", "file.log_candidates", "file.log_rank_within",
    "task.log_chars", "task.traceback", "task.names_path", "task.mentions_test",
)


def feature_rows(
    task_text: str,
    candidates: Sequence[Candidate],
    signals: Mapping[str, Sequence[float]],
    weighted: Sequence[float],
) -> list[tuple[float, ...]]:
    """One row of :data:`FEATURES` values per candidate, in the candidates' order.

    ``signals`` maps each signal's name to its value per candidate (missing
    known signals read as 0); ``weighted`` is the weighted fusion's score of
    each candidate, a prior the model may keep or overrule.
    """
    n = len(candidates)
    task = _task_facts(task_text)
    per_signal = [
        _scaled(list(signals.get(name, ())) or [0.0] * n) for name in KNOWN_SIGNALS
    ]
    _, weighted_share, weighted_rank = _scaled(list(weighted))
    by_file: dict[str, list[int]] = defaultdict(list)
    for i, candidate in enumerate(candidates):
        by_file[candidate.span.path].append(i)
    files = _file_facts(candidates, weighted, by_file)
    nesting = _nesting(candidates, by_file)
    most_terms = max((len(c.terms) for c in candidates), default=0)
    rows = []
    for i, candidate in enumerate(candidates):
        span = candidate.span
        row: list[float] = []
        for values, shares, ranks in per_signal:
            row += (values[i], shares[i], ranks[i])
        row += (weighted_share[i], weighted_rank[i])
        row += (float(candidate.kind == kind) for kind in KINDS)
        row += (
            math.log2(1 + span.end_line - span.start_line + 1),
            math.log2(1 + len(candidate.hit_lines)),
            float(len(candidate.terms)),
            len(candidate.terms) / most_terms if most_terms else 0.0,
        )
        row += (float(source in candidate.sources) for source in KNOWN_SOURCES)
        row.append(float(len(candidate.sources)))
        row.append(float(is_test_path(span.path)))
        row += nesting[i]
        row += files[i]
        row += task
        rows.append(tuple(row))
    return rows


def _scaled(values: list[float]) -> tuple[list[float], list[float], list[float]]:
    """The values, each as a share of the best, and ``log2(1 + rank)`` by value
    (tied values share the best rank of their tie)."""
    best = max(values, default=0.0)
    shares = [v / best if best > 0 else 0.0 for v in values]
    order = sorted(values, reverse=True)
    first_rank: dict[float, int] = {}
    for rank, value in enumerate(order, start=1):
        first_rank.setdefault(value, rank)
    return values, shares, [math.log2(1 + first_rank[v]) for v in values]


def _file_facts(
    candidates: Sequence[Candidate], weighted: Sequence[float], by_file: Mapping[str, list[int]]
) -> list[tuple[float, float, float, float]]:
    """Per candidate: its file's best weighted score as a share of the pool's
    best, the file's rank by that score, how many candidates the file has,
    and the candidate's rank within its file (each rank as ``log2(1 + rank)``);
    ``by_file`` holds each file's candidate indices."""
    best_of = {path: max(weighted[i] for i in members) for path, members in by_file.items()}
    top = max(best_of.values(), default=0.0)
    file_order = sorted(best_of, key=lambda path: (-best_of[path], path))
    file_rank = {path: rank for rank, path in enumerate(file_order, start=1)}
    within: dict[int, int] = {}
    for members in by_file.values():
        ordered = sorted(members, key=lambda i: (-weighted[i], candidates[i].span.start_line))
        within.update((i, rank) for rank, i in enumerate(ordered, start=1))
    facts = []
    for i, candidate in enumerate(candidates):
        path = candidate.span.path
        facts.append((
            best_of[path] / top if top > 0 else 0.0,
            math.log2(1 + file_rank[path]),
            math.log2(1 + len(by_file[path])),
            math.log2(1 + within[i]),
        ))
    return facts


def _nesting(
    candidates: Sequence[Candidate], by_file: Mapping[str, list[int]]
) -> list[tuple[float, float]]:
    """Per candidate: ``log2(1 + n)`` of the pool's candidates strictly inside its
    span, and whether one of the pool's candidates encloses it."""
    inner = [0] * len(candidates)
    outer = [False] * len(candidates)
    for members in by_file.values():
        for i in members:
            a = candidates[i].span
            for j in members:
                b = candidates[j].span
                if i != j and a.start_line <= b.start_line and b.end_line <= a.end_line and (
                    (a.start_line, a.end_line) != (b.start_line, b.end_line)
                ):
                    inner[i] += 1
                    outer[j] = True
    return [(math.log2(1 + inner[i]), float(outer[i])) for i in range(len(candidates))]


def _task_facts(task_text: str) -> tuple[float, float, float, float]:
    return (
        math.log2(1 + len(task_text)),
        float(bool(_TRACEBACK.search(task_text))),
        float(bool(_PATH_LIKE.search(task_text))),
        float(bool(_TEST_WORD.search(task_text))),
    )
