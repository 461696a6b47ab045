"""Fusing the plugins' ranking signals into one score and the ranked top-k.

score = Σ_add w·v × Π_scale (1 + w·v)

Additive signals (the BM25 match, a definition the task names) say how much
a candidate matches; scaling signals (a frame the task points at, a test
file) say how much that match should count. Signals are fused in name order
so the float result does not depend on which plugin registered first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, RankedCandidate, Signal


class SignalError(ValueError):
    """A plugin returned a malformed signal (wrong length, unknown mode, a name twice)."""


MODES = ("add", "scale")


def fuse(
    candidates: Sequence[Candidate], signals: Iterable[Signal], settings: Settings
) -> list[RankedCandidate]:
    """The best ``settings.top_k`` candidates by fused score, ranks 1..n.

    Ties keep a fixed order: path, then start line. With no signal every
    score is 0 and the merged order stands.
    """
    chosen = _checked(signals, len(candidates))
    weights = settings.signal_weight_overrides()
    scores = []
    for i in range(len(candidates)):
        base, factor = 0.0, 1.0
        for signal in chosen:
            weight = weights.get(signal.name, signal.weight)
            if signal.mode == "add":
                base += weight * signal.values[i]
            else:
                factor *= 1 + weight * signal.values[i]
        scores.append(base * factor)
    if not chosen:
        order = list(range(len(candidates)))
    else:
        order = sorted(
            range(len(candidates)),
            key=lambda i: (-scores[i], candidates[i].span.path, candidates[i].span.start_line),
        )
    return [
        RankedCandidate(
            candidates[i], rank, scores[i], tuple((s.name, s.values[i]) for s in chosen)
        )
        for rank, i in enumerate(order[: settings.top_k], start=1)
    ]


def _checked(signals: Iterable[Signal], n_candidates: int) -> list[Signal]:
    by_name: dict[str, Signal] = {}
    for signal in signals:
        if signal.name in by_name:
            raise SignalError(f"two plugins return a signal named {signal.name!r}")
        if len(signal.values) != n_candidates:
            raise SignalError(
                f"signal {signal.name!r} has {len(signal.values)} values "
                f"for {n_candidates} candidates"
            )
        if signal.mode not in MODES:
            raise SignalError(f"signal {signal.name!r} has mode {signal.mode!r}, not add or scale")
        by_name[signal.name] = signal
    return [by_name[name] for name in sorted(by_name)]
