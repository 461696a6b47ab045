"""Fusing the plugins' ranking signals into one score and the ranked top-k.

score = Σ_add w·v × Π_scale (1 + w·v)

Additive signals (the BM25 match, a definition the task names) say how much
a candidate matches; scaling signals (a frame the task points at, a test
file) say how much that match should count. Signals are fused in name order
so the float result does not depend on which plugin registered first.

With ``fusion = "learned"`` a ranking model (``ctx04_core/ranking/``) orders
the candidates instead, from their features, the fused score among them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ctx04_core.ranking.features import KNOWN_SIGNALS, POOL, feature_rows
from ctx04_core.ranking.file_cover import keep_weighted_files
from ctx04_core.ranking.model import SHIPPED_MODEL, ModelError, RankingModel, model_at
from ctx04_core.settings import LEARNED, Settings
from ctx04_core.types import TYPE_KINDS, Candidate, Diagnostic, RankedCandidate, Signal


class SignalError(ValueError):
    """A plugin returned a malformed signal (wrong length, unknown mode, a name twice)."""


MODES = ("add", "scale")
# The contributions a learned ranking keeps for each candidate (the JSON shows them).
CONTRIBUTIONS_KEPT = 5


def ranking_model(settings: Settings) -> tuple[RankingModel | None, tuple[Diagnostic, ...]]:
    """The model :func:`fuse` ranks with, or None for the weighted fusion.

    None when ``settings.fusion`` is "weighted", or when the model file
    (``settings.ranking_model``, else the shipped one) is missing or
    unusable: the weighted fusion then ranks, and the diagnostic says why.
    The file is read once per process while it stays unchanged.
    """
    if settings.fusion != LEARNED:
        return None, ()
    try:
        return model_at(Path(settings.ranking_model) if settings.ranking_model
                        else SHIPPED_MODEL), ()
    except ModelError as err:
        return None, (Diagnostic("unavailable", "ranking model", detail=str(err)),)


def fuse(
    candidates: Sequence[Candidate],
    signals: Iterable[Signal],
    settings: Settings,
    *,
    task_text: str = "",
    model: RankingModel | None = None,
) -> list[RankedCandidate]:
    """The first ``settings.top_k`` candidates of :func:`fused_order`."""
    return fused_order(candidates, signals, settings, task_text=task_text,
                       model=model)[: settings.top_k]


def fused_order(
    candidates: Sequence[Candidate],
    signals: Iterable[Signal],
    settings: Settings,
    *,
    task_text: str = "",
    model: RankingModel | None = None,
) -> list[RankedCandidate]:
    """The best ``settings.top_k`` candidates by fused score, ranks 1..n; given a
    ``model``, the rest of its pool after them, ranks n+1.., each with its model
    score and no contributions (a slice in doubt may draw on them).

    Ties keep a fixed order: path, then start line. With no signal every
    score is 0 and the merged order stands. With ``settings.type_factor``
    below 1, the first ``top_k`` are ordered with each type's score (a class,
    struct, ...; not a module) times it (the score each candidate carries is
    the one it was ordered by).

    Given a ``model`` (:func:`ranking_model`), the order is by its score of
    each candidate's features (``ranking.features.feature_rows`` over the
    task, the signals and the fused scores), ties as above; ``score`` stays
    the fused score. A signal the features do not read (a third-party
    plugin's, not in ``KNOWN_SIGNALS``) still counts: its ``w·v`` is added
    to the model score, whatever its mode, since the model score is no
    match to scale. Each candidate keeps the model score and its
    ``CONTRIBUTIONS_KEPT`` largest parts, those signals' among them. A
    model with a ``rank_fusion`` orders by it instead: its own order fused
    with the weighted one (:class:`ctx04_core.ranking.model.RankFusion`).
    Either way, every file among the weighted order's first ``top_k`` keeps
    a candidate among the learned order's first ``top_k``
    (:func:`ctx04_core.ranking.file_cover.keep_weighted_files`).
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
    if model is not None:
        return _learned(model, task_text, candidates, chosen, scores, weights, settings.top_k)
    order = _by_score(scores, candidates) if chosen else list(range(len(candidates)))
    head = order[: settings.top_k]
    if chosen and settings.type_factor != 1:
        scores = _types_discounted(scores, candidates, head, settings.type_factor)
        head = _by_score(scores, candidates, head)
    return [
        RankedCandidate(
            candidates[i], rank, scores[i], tuple((s.name, s.values[i]) for s in chosen)
        )
        for rank, i in enumerate(head, start=1)
    ]


def _types_discounted(
    scores: list[float], candidates: Sequence[Candidate], head: list[int], factor: float
) -> list[float]:
    """``scores`` with each type's among ``head`` times ``factor``.

    Only the order within the first ``top_k`` moves, never which candidates
    they are: discounting before the cut dropped containers whose file or
    symbol nothing else names (training tasks, factor 0.7, containers:
    symbol recall 0.582 -> 0.567 Python).
    """
    discounted = list(scores)
    for i in head:
        if candidates[i].kind in TYPE_KINDS:
            discounted[i] = scores[i] * factor
    return discounted


def _learned(
    model: RankingModel,
    task_text: str,
    candidates: Sequence[Candidate],
    chosen: list[Signal],
    scores: list[float],
    weights: dict[str, float],
    top_k: int,
) -> list[RankedCandidate]:
    # The model reorders the weighted fusion's first POOL candidates, the
    # pool it was fitted on: each feature (a rank, a share of the best) is
    # then read over the same set as in training, and a pool of thousands
    # costs no more than one of POOL.
    pool = _by_score(scores, candidates)[:POOL]
    members = [candidates[i] for i in pool]
    rows = feature_rows(
        task_text, members, {s.name: [s.values[i] for i in pool] for s in chosen},
        [scores[i] for i in pool],
    )
    unknown = [s for s in chosen if s.name not in KNOWN_SIGNALS]
    added = [
        tuple((s.name, weights.get(s.name, s.weight) * s.values[i]) for s in unknown)
        for i in pool
    ]
    log_odds = [model.score(row) for row in rows]
    model_scores = [
        own + sum(value for _, value in parts)
        for own, parts in zip(log_odds, added, strict=True)
    ]
    order = _by_score(model_scores, members)
    if model.rank_fusion is not None:
        order = _by_score(model.rank_fusion.scores(order), members)
    order = keep_weighted_files(order, [c.span.path for c in members], top_k)
    ranked = []
    for rank, j in enumerate(order, start=1):
        i = pool[j]
        largest: list[tuple[str, float]] = []
        if rank <= top_k:
            largest = sorted(model.contributions(rows[j]) + added[j], key=lambda p: -abs(p[1]))
        ranked.append(RankedCandidate(
            candidates[i], rank, scores[i], tuple((s.name, s.values[i]) for s in chosen),
            model_scores[j], tuple(largest[:CONTRIBUTIONS_KEPT]), log_odds[j],
        ))
    return ranked


def _by_score(
    scores: Sequence[float], candidates: Sequence[Candidate], among: Sequence[int] | None = None
) -> list[int]:
    """Indices of ``candidates`` (or only those ``among``) best score first, ties
    by path, then start line."""
    return sorted(
        range(len(candidates)) if among is None else among,
        key=lambda i: (-scores[i], candidates[i].span.path, candidates[i].span.start_line),
    )


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
