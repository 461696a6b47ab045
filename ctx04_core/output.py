"""The stable JSON form of a retrieval (schema ``ctx04.context-slice.v1``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ctx04_core.pipeline import Retrieval

SCHEMA = "ctx04.context-slice.v1"


def retrieval_json(result: Retrieval) -> dict[str, Any]:
    shown = {entry.excerpt.ranked.rank: entry for entry in result.context.entries}
    candidates = []
    for ranked in result.candidates:
        c = ranked.candidate
        entry = shown.get(ranked.rank)
        candidates.append(
            {
                "rank": ranked.rank,
                "path": c.span.path,
                "start_line": c.span.start_line,
                "end_line": c.span.end_line,
                "qualname": c.qualname,
                "kind": c.kind,
                "sources": list(c.sources),
                "score": round(ranked.score, 6),
                "included": bool(entry and entry.included),
                "tokens": entry.tokens if entry and entry.included else 0,
                "text": entry.text if entry and entry.included else "",
            }
        )
    q = result.query
    return {
        "schema": SCHEMA,
        "repo": {"root": str(result.root), "base": result.base},
        "query": {
            "identifiers": list(q.identifiers),
            "unresolved": list(q.unresolved),
            "error_strings": list(q.error_strings),
            "test_names": list(q.test_names),
            "file_paths": list(q.file_paths),
            "goal_hint": q.goal_hint,
        },
        "budget_tokens": result.context.budget_tokens,
        "tokens": result.context.tokens,
        "candidates": candidates,
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
            },
            "recalled": result.recalled,
            "plugins": list(result.plugins),
            "settings": result.settings.to_json(),
            "seconds": round(result.seconds, 3),
        },
    }
