"""A trained LightGBM booster as a ranking model file (the training side).

Works on the JSON ``booster.dump_model()`` returns, so neither this module
nor the retrieval needs lightgbm (the ``train`` extra) installed. The
ensemble must give one raw score per row (lambdarank, binary, regression),
split on numerical features only, and keep constant leaves: what
:mod:`ctx04_core.ranking.model` evaluates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctx04_core.ranking.model import FORMAT, TREES, VERSION

# dump_model's missing_type, as the model file names it.
_MISSING = {"None": "none", "Zero": "zero", "NaN": "nan"}


def model_json(dump: Mapping[str, Any]) -> dict[str, Any]:
    """The ranking model file's JSON object for a booster's ``dump_model()``."""
    if dump.get("num_tree_per_iteration") != 1:
        raise ValueError("the booster gives more than one score a row (multiclass)")
    if dump.get("average_output"):
        raise ValueError("the booster averages its trees (random forest), it does not sum them")
    return {
        "format": FORMAT,
        "version": VERSION,
        "kind": TREES,
        "features": list(dump["feature_names"]),
        "base_score": 0.0,
        "trees": [_tree(info["tree_structure"], info["num_leaves"]) for info in dump["tree_info"]],
    }


def _tree(root: Mapping[str, Any], num_leaves: int) -> dict[str, list[Any]]:
    splits = num_leaves - 1
    arrays: dict[str, list[Any]] = {
        name: [None] * splits
        for name in ("split_feature", "threshold", "default_left", "missing", "left", "right",
                     "internal_value")
    }
    arrays["leaf_value"] = [None] * num_leaves

    def index(node: Mapping[str, Any]) -> int:
        """The node's child index, its arrays filled in (and its subtree's)."""
        if "split_index" not in node:
            if "leaf_coeff" in node:
                raise ValueError("the booster has linear leaves (linear_tree)")
            leaf = int(node.get("leaf_index", 0))  # a tree of one leaf has no index
            arrays["leaf_value"][leaf] = float(node["leaf_value"])
            return ~leaf
        if node["decision_type"] != "<=":
            raise ValueError("the booster splits on a categorical feature")
        at = int(node["split_index"])
        arrays["split_feature"][at] = int(node["split_feature"])
        arrays["threshold"][at] = float(node["threshold"])
        arrays["default_left"][at] = bool(node["default_left"])
        arrays["missing"][at] = _MISSING[node["missing_type"]]
        arrays["internal_value"][at] = float(node["internal_value"])
        arrays["left"][at] = index(node["left_child"])
        arrays["right"][at] = index(node["right_child"])
        return at

    index(root)
    return arrays
