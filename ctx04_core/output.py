"""The stable JSON form of a retrieval (schema ``ctx04.context-slice.v1``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ctx04_core.pipeline import Retrieval
from ctx04_core.ranking.model import own_probability
from ctx04_core.trace import (
    decision_call_json,
    manifest,
    query_json,
    rendered_references,
    selection_json,
)
from ctx04_core.types import RankedCandidate

SCHEMA = "ctx04.context-slice.v1"


def retrieval_json(result: Retrieval) -> dict[str, Any]:
    shown = {entry.excerpt.ranked.rank: entry for entry in result.context.entries}
    candidates = []
    for ranked, record in zip(result.candidates, manifest(result), strict=True):
        entry = shown.get(record["rank"])
        candidates.append({
            **record, **learned_json(ranked),
            "text": entry.text if entry and entry.included else "",
        })
    return {
        "schema": SCHEMA,
        "repo": {"root": str(result.root), "base": result.base},
        "query": query_json(result.query),
        "budget_tokens": result.context.budget_tokens,
        "tokens": result.context.tokens,
        "candidates": candidates,
        "references": rendered_references(result),
        "diagnostics": {
            "coverage": [asdict(d) for d in result.diagnostics],
            "index": {
                "files": result.index.files,
                "parsed": result.index.parsed,
                "unchanged": result.index.unchanged,
                "removed": result.index.removed,
                "nodes": result.index.nodes,
                "edges": result.index.edges,
                "failures": [
                    {"path": p, "status": s, "message": m} for p, s, m in result.index.failures
                ],
                "seconds": round(result.index.seconds, 3),
                "recovered": result.index.recovered,
            },
            "recalled": result.recalled,
            "door": door_json(result),
            "plugins": list(result.plugins),
            "settings": result.settings.to_json(),
            "seconds": round(result.seconds, 3),
        },
    }


def learned_json(ranked: RankedCandidate) -> dict[str, Any]:
    """The score the learned fusion ranked a candidate by, its largest parts
    (feature: contribution, largest first) and the model's own probability
    that it holds a changed line (what the slice reads); nothing when the
    weighted fusion ranked."""
    if ranked.model_score is None:
        return {}
    found: dict[str, Any] = {
        "model_score": round(ranked.model_score, 6),
        "contributions": {name: round(value, 6) for name, value in ranked.contributions},
    }
    p = own_probability(ranked)
    if p is not None:
        found["probability"] = round(p, 6)
    return found


def door_json(result: Retrieval) -> dict[str, Any]:
    """Whether a decision door ranked the slice, and if not, why not."""
    decision = result.decision
    if decision is None:
        return {"ranked": False, "reason": "no decision door is enabled", "call": None,
                "selection": None}
    selection = decision.selection
    return {
        "ranked": selection is not None,
        "reason": decision.call.reason,
        "call": decision_call_json(decision.call),
        "selection": None if selection is None else selection_json(selection),
    }
