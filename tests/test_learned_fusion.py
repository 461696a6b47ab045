"""The learned ranking: the model file, its evaluator against LightGBM's own, and
the fuse stage ranking by it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SHOP, make_git_repo

from ctx04_core.pipeline import Retrieval, retrieve
from ctx04_core.ranking.features import FEATURES
from ctx04_core.ranking.lightgbm_export import model_json
from ctx04_core.ranking.model import ModelError, load_model, model_at, model_from_json
from ctx04_core.settings import Settings, SettingsError
from ctx04_core.stages.fuse import fuse
from ctx04_core.types import Candidate, Diagnostic, Signal, Span


def linear(features: list[str], weights: list[float], bias: float = 0.0) -> dict[str, Any]:
    return {"format": "ctx04-ranking-model", "version": 1, "kind": "linear",
            "features": features, "bias": bias, "weights": weights}


def row(values: dict[str, float]) -> tuple[float, ...]:
    """A row of FEATURES, 0 but for ``values``."""
    return tuple(values.get(name, 0.0) for name in FEATURES)


@pytest.mark.parametrize("objective", ["lambdarank", "binary"])
@pytest.mark.parametrize(
    ("zero_as_missing", "nan_share"), [(False, 0.05), (True, 0.05), (False, 0.0)],
    ids=["nan-missing", "zero-missing", "no-missing"],
)
def test_the_trees_score_as_lightgbm_does(
    objective: str, zero_as_missing: bool, nan_share: float
) -> None:
    # Without a NaN in the training data LightGBM writes no missing rule,
    # as in the shipped model: the evaluator walks those trees another way.
    lightgbm = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(23)
    table = rng.normal(size=(240, len(FEATURES)))
    table[rng.random(table.shape) < nan_share] = np.nan
    table[rng.random(table.shape) < 0.1] = 0.0
    labels = rng.integers(0, 3 if objective == "lambdarank" else 2, size=len(table))
    data = lightgbm.Dataset(table, labels, group=[12] * 20, feature_name=list(FEATURES))
    booster = lightgbm.train(
        {"objective": objective, "deterministic": True, "num_threads": 1, "verbose": -1,
         "num_leaves": 7, "min_data_in_leaf": 3, "seed": 5, "zero_as_missing": zero_as_missing},
        data, num_boost_round=6,
    )
    model = model_from_json(json.loads(json.dumps(model_json(booster.dump_model()))))

    assert model.features == FEATURES
    assert {rule for tree in model.trees for rule in tree.missing} == {
        "zero" if zero_as_missing else "nan" if nan_share else "none"
    }
    expected = booster.predict(table, raw_score=True)
    for values, raw in zip(table, expected, strict=True):
        assert model.score(tuple(values)) == pytest.approx(raw, abs=1e-9, rel=0)
        # Saabas: the contributions and the roots' values add up to the score.
        roots = sum(tree.internal_value[0] for tree in model.trees if tree.split_feature)
        contributions = model.contributions(tuple(values))
        assert sum(v for _, v in contributions) + roots == pytest.approx(raw, abs=1e-9, rel=0)
        assert [abs(v) for _, v in contributions] == sorted(
            (abs(v) for _, v in contributions), reverse=True
        )


def test_a_linear_model_reads_its_features_by_name() -> None:
    model = model_from_json(linear(["log_lines", "bm25.value"], [-0.25, 2.0], bias=0.5))

    assert model.score(row({"bm25.value": 3.0, "log_lines": 4.0, "terms": 7.0})) == 5.5
    assert model.contributions(row({"bm25.value": 3.0, "log_lines": 4.0})) == (
        ("bm25.value", 6.0), ("log_lines", -1.0),
    )


def test_a_calibrated_model_scores_the_log_odds_of_its_calibration() -> None:
    model = model_from_json({**linear(["log_lines", "bm25.value"], [-0.25, 2.0], bias=0.5),
                             "calibration": {"scale": 0.5, "shift": -2.0}})
    values = row({"bm25.value": 3.0, "log_lines": 4.0})

    # The raw score is 5.5, as uncalibrated above.
    assert model.score(values) == 0.5 * 5.5 - 2.0
    assert model.contributions(values) == (("bm25.value", 3.0), ("log_lines", -0.5))


@pytest.mark.parametrize(("calibration", "message"), [
    ({"scale": 0.0, "shift": 1.0}, "calibration: scale must be above 0"),
    ({"scale": -1.0, "shift": 1.0}, "calibration: scale must be above 0"),
    ({"scale": 1.0}, "calibration: shift is not a finite number"),
    ([1.0, 0.0], "calibration is not an object"),
], ids=["zero", "negative", "shift", "list"])
def test_a_calibration_that_would_turn_the_order_is_refused(
    calibration: object, message: str
) -> None:
    with pytest.raises(ModelError) as caught:
        model_from_json({**linear(["terms"], [1.0]), "calibration": calibration})
    assert str(caught.value) == message


def test_saabas_credits_each_split_with_the_change_it_makes() -> None:
    # bm25.value <= 1 ? leaf 0 : (terms <= 0 ? leaf 1 : leaf 2); a missing terms goes left.
    model = model_from_json({
        "format": "ctx04-ranking-model", "version": 1, "kind": "trees",
        "features": ["bm25.value", "terms"], "base_score": 0.25,
        "trees": [
            {"split_feature": [0, 1], "threshold": [1.0, 0.0], "default_left": [False, True],
             "missing": ["none", "nan"], "left": [-1, -2], "right": [1, -3],
             "internal_value": [0.5, 1.5], "leaf_value": [-1.0, 1.0, 2.0]},
            {"split_feature": [], "threshold": [], "default_left": [], "missing": [],
             "left": [], "right": [], "internal_value": [], "leaf_value": [0.125]},
        ],
    })
    reaching_leaf_1 = row({"bm25.value": 2.0, "terms": float("nan")})

    assert model.score(reaching_leaf_1) == 1.0 + 0.125 + 0.25
    assert model.contributions(reaching_leaf_1) == (("bm25.value", 1.0), ("terms", -0.5))
    # A NaN under the rule "none" reads as 0.
    assert model.score(row({"bm25.value": float("nan"), "terms": 3.0})) == -1.0 + 0.375
    assert model.score(row({"bm25.value": 1.5, "terms": 3.0})) == 2.0 + 0.375


def test_a_model_file_is_read_once_per_version(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(linear(["terms"], [1.0])))
    first = model_at(path)

    assert model_at(path) is first
    path.write_text(json.dumps(linear(["terms"], [2.0])))
    os.utime(path, ns=(0, path.stat().st_mtime_ns + 1_000_000))
    assert model_at(path).weights == (2.0,)


GOOD = linear(["terms"], [1.0])


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("{", "not valid JSON (Expecting property name enclosed in double quotes at line 1 "
          "column 2)"),
    (json.dumps({**GOOD, "format": "xgboost"}), "format 'xgboost', not 'ctx04-ranking-model'"),
    (json.dumps({**GOOD, "version": 2}), "version 2; this ctx04 reads version 1"),
    (json.dumps({**GOOD, "kind": "forest"}), "kind 'forest', not 'linear' or 'trees'"),
    (json.dumps(linear(["terms", "stars", "age"], [1.0, 1.0, 1.0])),
     "this ctx04 computes no feature named 'stars', 'age'"),
    (json.dumps(linear(["terms", "terms"], [1.0, 1.0])), "feature 'terms' is named twice"),
    (json.dumps(linear(["terms", "sources"], [1.0])), "1 weights for 2 features"),
    (json.dumps(linear(["terms"], ["1"])), "weights is not a list of finite numbers"),
    (json.dumps(linear(["terms"], [1.0], bias=float("nan"))), "bias is not a finite number"),
], ids=["missing", "json", "format", "version", "kind", "unknown", "twice", "length", "type",
        "nan"])
def test_an_unusable_model_file_is_one_clear_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelError) as caught:
        load_model(path)
    assert str(caught.value) == f"ranking model {path}: {message}"


def stump(**changed: list[Any]) -> dict[str, Any]:
    tree = {"split_feature": [0], "threshold": [0.5], "default_left": [True],
            "missing": ["none"], "left": [-1], "right": [-2], "internal_value": [0.0],
            "leaf_value": [-1.0, 1.0]}
    return {"format": "ctx04-ranking-model", "version": 1, "kind": "trees",
            "features": ["terms"], "base_score": 0.0, "trees": [{**tree, **changed}]}


@pytest.mark.parametrize(("model", "message"), [
    (stump(right=[-3]), "tree 0: node 0: right child -3 is out of range (1 split nodes, 2 leaves)"),
    (stump(left=[0]), "tree 0: node 0: left child 0 does not come after its parent"),
    (stump(split_feature=[1]), "tree 0: node 0: split feature 1 is out of range (1 features)"),
    (stump(leaf_value=[1.0]), "tree 0: 1 split nodes and 1 leaves, not 2"),
    (stump(threshold=[]), "tree 0: threshold has 0 entries for 1 split nodes"),
    (stump(missing=["null"]), "tree 0: missing is not a list of none, zero, nan"),
], ids=["leaf", "cycle", "feature", "leaves", "threshold", "missing"])
def test_a_malformed_tree_is_refused(model: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError) as caught:
        model_from_json(model)
    assert str(caught.value) == message


A, B, C = (
    Candidate(Span(p, 1, 2), "function", f"{p}.f", ("test",)) for p in ("a.py", "b.py", "c.py")
)


def test_fuse_ranks_by_the_model_and_adds_the_signals_it_does_not_know() -> None:
    model = model_from_json(linear(["bm25.value"], [1.0]))
    signals = [
        Signal("bm25", (1.0, 3.0, 2.0), 1.0),
        Signal("auxiliary", (0.0, 1.0, 0.0), -0.9, "scale"),
        Signal("third_party", (0.0, 0.0, 0.5), 4.0, "scale"),
    ]
    weighted = fuse((A, B, C), signals, Settings())
    learned = fuse((A, B, C), signals, Settings(), task_text="fix f", model=model)

    # Weighted: b 3 x 0.1, c 2 x 3, a 1; the model: bm25 alone, plus 4 x 0.5 for c.
    assert [(r.candidate, r.score, r.model_score) for r in weighted] == [
        (C, 6.0, None), (A, 1.0, None), (B, 3.0 * (1 - 0.9), None),
    ]
    assert [(r.candidate, r.rank, r.score, r.model_score) for r in learned] == [
        (C, 1, 6.0, 4.0), (B, 2, 3.0 * (1 - 0.9), 3.0), (A, 3, 1.0, 1.0),
    ]
    assert learned[0].contributions == (("bm25.value", 2.0), ("third_party", 2.0))
    assert learned[0].signals == weighted[0].signals
    # What the slice reads as the model's probability is its own score alone.
    assert [r.log_odds for r in learned] == [2.0, 3.0, 1.0]
    assert {r.log_odds for r in weighted} == {None}


def test_a_rank_fusion_meets_the_model_and_the_weighted_order_halfway() -> None:
    signals = [Signal("bm25", (1.0, 3.0, 2.0), 1.0), Signal("tested", (5.0, 0.0, 0.0), 1.0)]
    # Weighted: a 6, b 3, c 2. The model reads bm25 alone: b, c, a.
    alone = model_from_json(linear(["bm25.value"], [1.0]))
    fused = model_from_json({**linear(["bm25.value"], [1.0]),
                             "rank_fusion": {"k": 1, "model_weight": 1}})
    assert [r.candidate for r in fuse((A, B, C), signals, Settings(), model=alone)] == [B, C, A]
    # Fused, model place then weighted place: a 1/3 + 1/1, b 1/1 + 1/2, c 1/2 + 1/3.
    learned = fuse((A, B, C), signals, Settings(), model=fused)
    assert [(r.candidate, r.model_score) for r in learned] == [(B, 3.0), (A, 1.0), (C, 2.0)]


def test_a_learned_order_keeps_the_files_the_weighted_order_names() -> None:
    from ctx04_core.ranking.file_cover import keep_weighted_files

    # A pool in weighted order over files x y z x y; the model's first 3 are
    # x, y, x: z, the weighted third, is out. It comes back (its best
    # candidate, 2) in place of the last candidate of a file with two there
    # (x's 0), which follows with the rest.
    paths = ["x", "y", "z", "x", "y"]
    assert keep_weighted_files([3, 4, 0, 1, 2], paths, 3) == [3, 4, 2, 0, 1]
    # Every weighted file already there: the order is unchanged.
    assert keep_weighted_files([3, 4, 2, 0, 1], paths, 3) == [3, 4, 2, 0, 1]
    # x, y and z are the weighted first 3; the model's first 2 (x, y) have
    # no candidate to spare for z.
    assert keep_weighted_files([3, 4, 0, 1, 2], paths, 2) == [3, 4, 0, 1, 2]
    # Two files missing, two to spare: both back, in weighted order.
    paths = ["a", "b", "c", "d", "d", "d"]
    assert keep_weighted_files([3, 4, 5, 0, 1, 2], paths, 4) == [3, 0, 1, 2, 4, 5]


def test_the_fuse_stage_keeps_the_weighted_files_in_its_top_k() -> None:
    b2 = Candidate(Span("b.py", 5, 6), "function", "b.py.g", ("test",))
    signals = [Signal("bm25", (1.0, 4.0, 2.0, 3.5), 1.0), Signal("tested", (9.0, 0, 0, 0), 1.0)]
    # Weighted: A 10, B 4, b2 3.5, C 2. The model reads bm25 alone: B, b2,
    # C, A; its first 2 are both b.py, and a.py, weighted first, comes back
    # in place of b2.
    model = model_from_json(linear(["bm25.value"], [1.0]))
    learned = fuse((A, B, C, b2), signals, Settings(top_k=2), model=model)
    assert [(r.candidate, r.rank, r.model_score) for r in learned] == [(B, 1, 4.0), (A, 2, 1.0)]
    assert [r.candidate for r in fuse((A, B, C, b2), signals, Settings(top_k=4), model=model)] == [
        B, b2, C, A,
    ]


def test_fusion_is_weighted_or_learned() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings(fusion="best")
    assert str(caught.value) == "fusion (CTX04_FUSION) is one of weighted, learned, not 'best'"


TASK = "Cart.total() rounds the discounted subtotal wrongly"
# shipping_cost holds a line the third-party ``pin`` plugin marks: its scaling
# signal, unknown to the model, adds 1 x 1 to its model score.
PINNED = {**SHOP, "shop/shipping.py": SHOP["shop/shipping.py"].replace(
    "    return 4.5", "    return 4.5  # ctx04: pin", 1,
)}


def ranked_by(result: Retrieval) -> list[str | None]:
    return [r.candidate.qualname for r in result.candidates]


def test_the_learned_fusion_ranks_a_retrieval(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", PINNED)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(linear(["bm25.value"], [1.0])))
    # The optional meaning plugin is a signal the model does not know either:
    # left out, so the order rests on bm25 and pin alone.
    weighted = retrieve(TASK, root, disable=("meaning",))
    learned = retrieve(TASK, root, disable=("meaning",),
                       settings=Settings(fusion="learned", ranking_model=str(path)))

    # The test, sunk by its auxiliary signal under the weighted fusion, is
    # second by its bm25 match alone.
    assert ranked_by(weighted)[:8] == [
        "shop.cart.Cart.total", "shop.cart.LineItem.subtotal", "shop.cart.Cart",
        "shop.cart.Cart.apply_coupon", "shop.shipping.shipping_cost", "shop", "shop.cart",
        "tests.test_cart.test_total_with_coupon",
    ]
    # Those bm25 does not match tie at 0: by path, then line. The test file's
    # module, sixth, comes after the rest of the first ten (its file is met).
    # The leading file's module moves up one, to where a reader meets it
    # tenth: `Cart` is read with its methods, each once (`total` and
    # `apply_coupon` among them).
    assert ranked_by(learned) == [
        "shop.cart.Cart.total", "tests.test_cart.test_total_with_coupon",
        "shop.cart.LineItem.subtotal", "shop", "shop.cart.Cart",
        "shop.cart.Cart.apply_coupon", "shop.cart", "shop.shipping.shipping_cost",
        "shop.pricing.apply_discount", "tests.test_cart", "shop.cart.Cart.add",
        "shop.cart.LineItem", "shop.cart.Cart.__init__", "shop.cart.Cart.remove",
        "shop.inventory.Inventory", "shop.pricing.round_money",
    ]
    for ranked in learned.candidates:
        signals = dict(ranked.signals)
        assert ranked.model_score == signals["bm25"] + signals["pin"]
        assert ranked.contributions == tuple(sorted(
            [("bm25.value", signals["bm25"]), ("pin", signals["pin"]),
             ("title", 2.0 * signals["title"])],
            key=lambda part: -abs(part[1]),
        ))
    assert dict(learned.candidates[7].signals)["pin"] == 1.0
    assert not [d for d in learned.diagnostics if d.reason == "ranking model"]


def test_an_unusable_model_falls_back_to_the_weighted_fusion(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", SHOP)
    path = tmp_path / "model.json"
    path.write_text("not json")
    weighted = retrieve(TASK, root)
    fallen_back = retrieve(TASK, root, settings=Settings(fusion="learned",
                                                         ranking_model=str(path)))

    assert fallen_back.candidates == weighted.candidates
    assert [d for d in fallen_back.context.diagnostics if d.reason == "ranking model"] == [
        Diagnostic("unavailable", "ranking model", detail=(
            f"ranking model {path}: not valid JSON (Expecting value at line 1 column 1)"
        )),
    ]


def test_the_json_shows_what_the_model_ranked_by(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", PINNED)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(linear(["bm25.value"], [1.0])))
    ctx04 = Path(sys.executable).parent / "ctx04"

    def candidates(env: dict[str, str]) -> list[dict[str, Any]]:
        done = subprocess.run(
            [str(ctx04), "retrieve", TASK, "--repo", str(root), "--format", "json",
             "--disable", "meaning"],
            capture_output=True, text=True, check=False, env={**os.environ, **env},
        )
        assert done.returncode == 0, done.stderr
        found: list[dict[str, Any]] = json.loads(done.stdout)["candidates"]
        return found

    learned = candidates({"CTX04_FUSION": "learned", "CTX04_RANKING_MODEL": str(path)})
    weighted = candidates({})

    second = learned[1]
    assert second["qualname"] == "tests.test_cart.test_total_with_coupon"
    assert second["model_score"] == second["signals"]["bm25"]
    assert second["contributions"] == {
        "bm25.value": second["signals"]["bm25"], "pin": 0.0, "title": 0.0,
    }
    pinned = next(c for c in learned if c["qualname"] == "shop.shipping.shipping_cost")
    assert list(pinned["contributions"].items()) == [
        ("bm25.value", pinned["signals"]["bm25"]), ("pin", 1.0), ("title", 0.0),
    ]
    # The probability the slice reads is the model's own: pin's 1.0 moves the
    # order (model_score), not it.
    for candidate in (second, pinned):
        own = candidate["signals"]["bm25"]
        assert candidate["probability"] == round(1 / (1 + math.exp(-own)), 6)
    assert pinned["model_score"] == round(pinned["signals"]["bm25"] + 1.0, 6)
    assert not {"model_score", "contributions", "probability"} & {
        key for c in weighted for key in c
    }


def test_rank_fusion_meets_the_weighted_order() -> None:
    from ctx04_core.ranking.model import RankFusion

    # Pool in weighted order a, b, c; the model's order is c, a, b.
    scores = RankFusion(k=1.0, model_weight=2.0).scores([2, 0, 1])
    assert scores == [2 / 2 + 1 / 1, 2 / 3 + 1 / 2, 2 / 1 + 1 / 3]


def test_a_model_file_names_its_rank_fusion(tmp_path: Path) -> None:
    from ctx04_core.ranking.model import ModelError, RankFusion, load_model

    path = tmp_path / "m.json"
    document = {"format": "ctx04-ranking-model", "version": 1, "kind": "linear",
                "features": ["bm25.value"], "bias": 0.0, "weights": [1.0],
                "rank_fusion": {"k": 5, "model_weight": 2}}
    path.write_text(json.dumps(document))
    assert load_model(path).rank_fusion == RankFusion(5.0, 2.0)
    path.write_text(json.dumps({**document, "rank_fusion": {"k": 0, "model_weight": 2}}))
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert str(err.value) == (
        f"ranking model {path}: rank_fusion: k must be above 0 and model_weight not below 0"
    )


def test_the_shipped_model_reads_todays_features() -> None:
    from ctx04_core.ranking.model import SHIPPED_MODEL, load_model

    # A renamed or dropped feature would make the shipped file unusable and
    # every learned retrieval fall back: it must load as trained.
    model = load_model(SHIPPED_MODEL)
    assert (model.kind, model.rank_fusion, model.trees) == ("linear", None, ())
    assert model.features == FEATURES


def test_the_default_fusion_is_the_shipped_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTX04_FUSION")  # the suite pins the weighted one (conftest)
    root = make_git_repo(tmp_path / "shop", SHOP)
    assert Settings().fusion == "learned"
    default = retrieve(TASK, root)
    asked = retrieve(TASK, root, settings=Settings(fusion="learned"))

    assert default.candidates == asked.candidates
    assert all(r.model_score is not None and r.contributions for r in default.candidates)
    assert not [d for d in default.diagnostics if d.reason == "ranking model"]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ctx04"), "retrieve", TASK, "--repo", str(root),
         "--format", "json"],
        capture_output=True, text=True, check=False, env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["candidates"]
    assert [c["model_score"] for c in shown] == [
        round(r.model_score, 6) for r in default.candidates  # type: ignore[arg-type]
    ]
