"""The ranking model's file format and its pure-Python evaluator.

A model is one small JSON object::

    {"format": "ctx04-ranking-model", "version": 1, "kind": "linear" | "trees",
     "features": [names, in the order the model reads them], ...}

``linear`` adds ``"bias"`` and ``"weights"`` (one per feature): the score is
``bias + Σ weight·value``; a trainer folds any standardisation into them.

``trees`` adds ``"base_score"`` and ``"trees"``, an ensemble (LightGBM's,
see :mod:`ctx04_core.ranking.lightgbm_export`) whose score is the sum of
each tree's leaf, plus ``base_score``. A tree is flat arrays over its split
nodes (node 0 is the root): ``split_feature`` (an index into ``features``),
``threshold``, ``default_left``, ``missing`` (``"none"``, ``"zero"`` or
``"nan"``), ``left``, ``right`` and ``internal_value`` (the node's value,
what the attribution measures changes of); and ``leaf_value``. A child
``c >= 0`` is split node ``c``, one after its parent; ``c < 0`` is the leaf
``~c`` (LightGBM's own encoding). A tree with no split is the leaf 0 alone.
A split goes left when ``value <= threshold``, except for a missing value
(NaN under ``"nan"``, zero under ``"zero"``), which goes ``default_left``;
a NaN under another rule counts as 0, as LightGBM decides numerical splits.

Either kind may add ``"calibration": {"scale": a, "shift": b}`` (``a > 0``):
the model's score is then ``a·raw + b``, the raw score's log-odds that the
candidate holds a changed line as a logistic fit of the raw scores of the
repositories each fold left out reads them (Platt scaling, ``ctx04
train``). The order is the raw score's; what changes is what the slice's
rules read as a probability (``stages/value.py``: the doubt gate and its
floors), which a lambdarank score is not, and which a model fitted on
repositories unlike the task's overstates. A file without it (the shipped
logistic model) scores its raw score.

A row holds the features :mod:`ctx04_core.ranking.features` computes, in its
``FEATURES`` order; a model may read any of them in any order, but a feature
name this code does not compute is refused at load, so that a model trained
on other columns is never fed the wrong ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, TypeGuard

from ctx04_core.ranking.features import FEATURES
from ctx04_core.types import RankedCandidate

FORMAT = "ctx04-ranking-model"
VERSION = 1
LINEAR = "linear"
TREES = "trees"
MISSING_RULES = ("none", "zero", "nan")
# The model fusion "learned" ranks with when the ranking_model setting is "".
SHIPPED_MODEL = Path(__file__).with_name("model.json")
# LightGBM's kZeroThreshold, what a "zero" missing rule counts as zero: the
# float 1e-35f as a double, as LightGBM compares it.
_ZERO = 1.0000000180025095e-35


# A tree without missing rules as RankingModel's loops read it: split_feature,
# threshold, left, right, leaf_value and Tree.changes.
_PlainTree = tuple[
    tuple[int, ...], tuple[float, ...], tuple[int, ...], tuple[int, ...], tuple[float, ...],
    tuple[tuple[float, ...], tuple[float, ...]],
]


def probability(log_odds: float) -> float:
    """The probability of ``log_odds``; ``exp`` only of a non-positive number,
    which cannot overflow whatever a model file scores."""
    if log_odds >= 0:
        return 1.0 / (1.0 + math.exp(-log_odds))
    odds = math.exp(log_odds)
    return odds / (1.0 + odds)


def own_probability(ranked: RankedCandidate) -> float | None:
    """The model's own probability that the candidate holds a changed line (its
    ``log_odds``, not its ``model_score``, which other signals move): what the
    slice's doubt gate reads. None when no model ranked the candidate."""
    return None if ranked.log_odds is None else probability(ranked.log_odds)


def sure_of(probabilities: Iterable[float], gate: float, margin: float) -> bool:
    """Whether the learned order is sure of its most probable candidate: the
    slice's doubt gate. Sure when that candidate holds a changed line with a
    probability of at least ``gate`` and at least ``margin`` times the next
    one's: two leaders alike make the slice doubt either of them."""
    best = sorted(probabilities, reverse=True)[:2]
    if not best:
        return False
    runner_up = best[1] if len(best) > 1 else 0.0
    return best[0] >= gate and best[0] >= margin * runner_up


class ModelError(ValueError):
    """A ranking model file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Tree:
    """One regression tree of a ``trees`` model (the module docstring has the arrays)."""

    split_feature: tuple[int, ...]
    threshold: tuple[float, ...]
    default_left: tuple[bool, ...]
    missing: tuple[str, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    internal_value: tuple[float, ...]
    leaf_value: tuple[float, ...]

    def path(self, values: Sequence[float]) -> Iterator[tuple[int, int]]:
        """Each split node the values pass through, with the child they take."""
        node = self._root()
        while node >= 0:
            child = self._child(node, values)
            yield node, child
            node = child

    def output(self, values: Sequence[float]) -> float:
        """The value of the leaf the values reach."""
        node = self._root()
        while node >= 0:
            node = self._child(node, values)
        return self.leaf_value[~node]

    @cached_property
    def no_missing_rule(self) -> bool:
        """Every split's missing rule is "none": a value goes left iff ``<= threshold``
        (a NaN read as 0)."""
        return all(rule == "none" for rule in self.missing)

    @cached_property
    def changes(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per split node, the change of value to its left child and to its right:
        what the attribution credits to the node's split feature."""
        nodes = range(len(self.split_feature))
        return (
            tuple(self.value(self.left[node]) - self.value(node) for node in nodes),
            tuple(self.value(self.right[node]) - self.value(node) for node in nodes),
        )

    def value(self, child: int) -> float:
        """A split node's or a leaf's value, by child index."""
        return self.internal_value[child] if child >= 0 else self.leaf_value[~child]

    def _root(self) -> int:
        return 0 if self.split_feature else ~0

    def _child(self, node: int, values: Sequence[float]) -> int:
        return self.left[node] if self._goes_left(node, values) else self.right[node]

    def _goes_left(self, node: int, values: Sequence[float]) -> bool:
        value = values[self.split_feature[node]]
        rule = self.missing[node]
        if math.isnan(value) and rule != "nan":
            value = 0.0
        if (rule == "zero" and -_ZERO <= value <= _ZERO) or (rule == "nan" and math.isnan(value)):
            return self.default_left[node]
        return value <= self.threshold[node]


@dataclass(frozen=True)
class RankFusion:
    """Reciprocal-rank fusion of the model's order with the weighted fusion's.

    A candidate at 0-based place ``m`` in the model's order and ``w`` in the
    weighted one scores ``model_weight / (k + m) + 1 / (k + w)``. The model
    is the better judge of which function holds the change, the weighted
    fusion of which files do (leave-one-repository-out: the model alone
    lost file Acc@5); ``ctx04 train`` chooses whether and how to fuse.
    """

    k: float
    model_weight: float

    def scores(self, model_order: Sequence[int]) -> list[float]:
        """The fused score of each candidate of a pool in weighted order, given
        the model's order of the pool (indices, best first)."""
        place = {index: m for m, index in enumerate(model_order)}
        return [
            self.model_weight / (self.k + place[w]) + 1.0 / (self.k + w)
            for w in range(len(model_order))
        ]


@dataclass(frozen=True)
class Calibration:
    """The logistic map of a model's raw score to its log-odds of a changed line."""

    scale: float
    shift: float


@dataclass(frozen=True)
class RankingModel:
    """A loaded ranking model: scores a row of ``features.FEATURES`` values."""

    kind: str  # LINEAR or TREES
    features: tuple[str, ...]  # as the model names them, in its order
    columns: tuple[int, ...]  # each of ``features``' position in a row
    bias: float  # a linear model's bias, a tree ensemble's base_score
    weights: tuple[float, ...] = ()  # linear: one per feature
    trees: tuple[Tree, ...] = ()
    rank_fusion: RankFusion | None = None  # how its order meets the weighted one, if at all
    calibration: Calibration | None = None

    def score(self, row: Sequence[float]) -> float:
        """The row's score: its log-odds of holding a changed line when the model
        is calibrated (or is the shipped logistic model), else its raw score."""
        raw = self._raw_score(row)
        if self.calibration is None:
            return raw
        return self.calibration.scale * raw + self.calibration.shift

    def _raw_score(self, row: Sequence[float]) -> float:
        values = [row[c] for c in self.columns]
        if self.kind == LINEAR:
            total = self.bias
            for weight, value in zip(self.weights, values, strict=True):
                total += weight * value
            return total
        # LightGBM sums the trees from 0, then adds any initial score.
        total = 0.0
        if self._plain_trees is None:
            for tree in self.trees:
                total += tree.output(values)
            return total + self.bias
        # The fuse stage's hot loop (hundreds of trees for each of hundreds of
        # candidates): the split rule inlined over local arrays.
        values = [0.0 if value != value else value for value in values]
        for split_feature, threshold, left, right, leaf_value, _ in self._plain_trees:
            node = 0 if split_feature else ~0
            while node >= 0:
                node = left[node] if values[split_feature[node]] <= threshold[node] else right[node]
            total += leaf_value[~node]
        return total + self.bias

    def contributions(self, row: Sequence[float]) -> tuple[tuple[str, float], ...]:
        """How much each feature moved this row's score, the largest by magnitude first.

        Linear: weight·value. Trees: the change of the node value along the
        row's path, credited to each split's feature (Saabas), so the
        contributions and the trees' root values sum to the score. A
        calibration scales each by its ``scale``.
        """
        values = [row[c] for c in self.columns]
        if self.kind == LINEAR:
            moved = [weight * value for weight, value in zip(self.weights, values, strict=True)]
        elif self._plain_trees is None:
            moved = [0.0] * len(self.features)
            for tree in self.trees:
                for node, child in tree.path(values):
                    moved[tree.split_feature[node]] += tree.value(child) - tree.value(node)
        else:
            # As score's loop, crediting each split with the change Tree.changes holds.
            moved = [0.0] * len(self.features)
            values = [0.0 if value != value else value for value in values]
            for split_feature, threshold, left, right, _, (to_left, to_right) in self._plain_trees:
                node = 0 if split_feature else ~0
                while node >= 0:
                    feature = split_feature[node]
                    if values[feature] <= threshold[node]:
                        moved[feature] += to_left[node]
                        node = left[node]
                    else:
                        moved[feature] += to_right[node]
                        node = right[node]
        if self.calibration is not None:
            moved = [self.calibration.scale * value for value in moved]
        return tuple(sorted(zip(self.features, moved, strict=True), key=lambda c: -abs(c[1])))

    @cached_property
    def _plain_trees(self) -> tuple[_PlainTree, ...] | None:
        """When no split has a missing rule (the shipped model has none), each
        tree's arrays, read without an attribute look-up: a value then goes
        left iff ``<= threshold``, a NaN read as 0, so NaNs are replaced once
        per row instead of checked at each split."""
        if not all(tree.no_missing_rule for tree in self.trees):
            return None
        return tuple(
            (tree.split_feature, tree.threshold, tree.left, tree.right, tree.leaf_value,
             tree.changes)
            for tree in self.trees
        )


def fold_model_path(directory: Path, repo: str) -> Path:
    """Where ``ctx04 train --fold-models`` writes the model fitted without the
    repository ``repo`` (``owner/name``), and ``ctx04 eval --fold-models`` reads it."""
    return directory / f"{repo.replace('/', '__')}.json"


def load_model(path: Path) -> RankingModel:
    """The model in the file at ``path``; a :class:`ModelError` naming the file says why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelError(f"ranking model {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ModelError(f"ranking model {path}: unreadable ({err})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ModelError(
            f"ranking model {path}: not valid JSON ({err.msg} at line {err.lineno} "
            f"column {err.colno})"
        ) from None
    try:
        return model_from_json(data)
    except ModelError as err:
        raise ModelError(f"ranking model {path}: {err}") from None


def model_at(path: Path) -> RankingModel:
    """:func:`load_model`, read once per process for each version of the file."""
    try:
        stat = path.stat()
    except OSError:
        return load_model(path)  # raises the error that says what is wrong
    return _loaded(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _loaded(path: Path, mtime_ns: int, size: int) -> RankingModel:
    return load_model(path)


def model_from_json(data: object) -> RankingModel:
    """The model a parsed model file describes; a :class:`ModelError` when it is not one."""
    if not isinstance(data, dict):
        raise ModelError("not a JSON object")
    if data.get("format") != FORMAT:
        raise ModelError(f"format {data.get('format')!r}, not {FORMAT!r}")
    if data.get("version") != VERSION:
        raise ModelError(f"version {data.get('version')!r}; this ctx04 reads version {VERSION}")
    features = _names(data)
    columns = tuple(FEATURES.index(name) for name in features)
    fusion = _rank_fusion(data)
    calibration = _calibration(data)
    kind = data.get("kind")
    if kind == LINEAR:
        weights = _numbers(data, "weights", "")
        if len(weights) != len(features):
            raise ModelError(f"{len(weights)} weights for {len(features)} features")
        return RankingModel(LINEAR, features, columns, _number(data, "bias", ""), weights,
                            rank_fusion=fusion, calibration=calibration)
    if kind == TREES:
        trees = data.get("trees")
        if not isinstance(trees, list):
            raise ModelError("trees is not a list")
        return RankingModel(
            TREES, features, columns, _number(data, "base_score", ""),
            trees=tuple(_tree(tree, f"tree {i}: ", len(features)) for i, tree in enumerate(trees)),
            rank_fusion=fusion, calibration=calibration,
        )
    raise ModelError(f"kind {kind!r}, not {LINEAR!r} or {TREES!r}")


def _optional_object(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    found = data.get(name)
    if found is not None and not isinstance(found, dict):
        raise ModelError(f"{name} is not an object")
    return found


def _rank_fusion(data: dict[str, Any]) -> RankFusion | None:
    found = _optional_object(data, "rank_fusion")
    if found is None:
        return None
    k = _number(found, "k", "rank_fusion: ")
    weight = _number(found, "model_weight", "rank_fusion: ")
    if k <= 0 or weight < 0:
        raise ModelError("rank_fusion: k must be above 0 and model_weight not below 0")
    return RankFusion(k, weight)


def _calibration(data: dict[str, Any]) -> Calibration | None:
    found = _optional_object(data, "calibration")
    if found is None:
        return None
    scale = _number(found, "scale", "calibration: ")
    if scale <= 0:
        # A scale not above 0 would turn the order over, or flatten it.
        raise ModelError("calibration: scale must be above 0")
    return Calibration(scale, _number(found, "shift", "calibration: "))


def _names(data: dict[str, Any]) -> tuple[str, ...]:
    features = data.get("features")
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise ModelError("features is not a list of names")
    twice = sorted({f for f in features if features.count(f) > 1})
    if twice:
        raise ModelError(f"feature {twice[0]!r} is named twice")
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ModelError(
            f"this ctx04 computes no feature named {', '.join(map(repr, unknown))}"
        )
    return tuple(features)


def _tree(data: object, where: str, n_features: int) -> Tree:
    if not isinstance(data, dict):
        raise ModelError(f"{where}not a JSON object")
    split_feature = _integers(data, "split_feature", where)
    splits = len(split_feature)
    leaf_value = _numbers(data, "leaf_value", where)
    if len(leaf_value) != splits + 1:
        raise ModelError(
            f"{where}{splits} split nodes and {len(leaf_value)} leaves, not {splits + 1}"
        )
    left, right = _integers(data, "left", where), _integers(data, "right", where)
    default_left = data.get("default_left")
    if not isinstance(default_left, list) or not all(isinstance(d, bool) for d in default_left):
        raise ModelError(f"{where}default_left is not a list of booleans")
    missing = data.get("missing")
    if not isinstance(missing, list) or not all(m in MISSING_RULES for m in missing):
        raise ModelError(f"{where}missing is not a list of {', '.join(MISSING_RULES)}")
    tree = Tree(
        split_feature, _numbers(data, "threshold", where), tuple(default_left), tuple(missing),
        left, right, _numbers(data, "internal_value", where), leaf_value,
    )
    for name in ("threshold", "default_left", "missing", "left", "right", "internal_value"):
        if len(getattr(tree, name)) != splits:
            raise ModelError(
                f"{where}{name} has {len(getattr(tree, name))} entries for {splits} split nodes"
            )
    for node in range(splits):
        if not 0 <= split_feature[node] < n_features:
            raise ModelError(
                f"{where}node {node}: split feature {split_feature[node]} is out of range "
                f"({n_features} features)"
            )
        for side, child in (("left", left[node]), ("right", right[node])):
            if not -splits - 1 <= child < splits:
                raise ModelError(
                    f"{where}node {node}: {side} child {child} is out of range "
                    f"({splits} split nodes, {splits + 1} leaves)"
                )
            # So every path ends: no cycle.
            if 0 <= child <= node:
                raise ModelError(
                    f"{where}node {node}: {side} child {child} does not come after its parent"
                )
    return tree


def _number(data: dict[str, Any], name: str, where: str) -> float:
    value = data.get(name)
    if not _finite(value):
        raise ModelError(f"{where}{name} is not a finite number")
    return float(value)


def _numbers(data: dict[str, Any], name: str, where: str) -> tuple[float, ...]:
    values = data.get(name)
    if not isinstance(values, list) or not all(_finite(v) for v in values):
        raise ModelError(f"{where}{name} is not a list of finite numbers")
    return tuple(float(v) for v in values)


def _finite(value: object) -> TypeGuard[int | float]:
    """A JSON number a score can be built of: Python's json reads NaN and
    Infinity, and one NaN would leave the rank order undefined."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    )


def _integers(data: dict[str, Any], name: str, where: str) -> tuple[int, ...]:
    values = data.get(name)
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    ):
        raise ModelError(f"{where}{name} is not a list of integers")
    return tuple(values)
