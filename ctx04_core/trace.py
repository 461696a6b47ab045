"""The trace record: one JSON line per retrieval, appended to a file the caller names.

Built from the objects the retrieval already holds, never by reading files
again, so it records exactly what was rendered: the query terms, only the
references actually shown (with the text, so a harness can vet artifacts
against it later), the coverage diagnostics, the slice's digest, and the full
candidate manifest.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ctx04_core.evidence import sha256_hex
from ctx04_core.pipeline import Retrieval
from ctx04_core.types import SOURCE_REF_SCHEMA, TRACE_SCHEMA, Query, SourceRef


def source_ref_json(ref: SourceRef) -> dict[str, Any]:
    return {"schema": SOURCE_REF_SCHEMA, **asdict(ref)}


def rendered_references(result: Retrieval) -> list[dict[str, Any]]:
    """The source reference of every entry the slice shows, with its rank and text."""
    return [
        {**source_ref_json(entry.evidence.ref), "rank": entry.excerpt.ranked.rank,
         "text": entry.evidence.text}
        for entry in result.context.entries
        if entry.included
    ]


def manifest(result: Retrieval) -> list[dict[str, Any]]:
    """Every ranked candidate's observable record: where, why, and whether it was shown."""
    shown = {e.excerpt.ranked.rank: e for e in result.context.entries}
    records = []
    for ranked in result.candidates:
        c = ranked.candidate
        entry = shown.get(ranked.rank)
        records.append({
            "rank": ranked.rank, "path": c.span.path, "start_line": c.span.start_line,
            "end_line": c.span.end_line, "qualname": c.qualname, "kind": c.kind,
            "sources": list(c.sources), "score": round(ranked.score, 6),
            "signals": {name: round(value, 6) for name, value in ranked.signals},
            "included": bool(entry and entry.included),
            "tokens": entry.tokens if entry and entry.included else 0,
        })
    return records


def query_json(q: Query) -> dict[str, Any]:
    return {
        "identifiers": list(q.identifiers), "unresolved": list(q.unresolved),
        "error_strings": list(q.error_strings), "test_names": list(q.test_names),
        "file_paths": list(q.file_paths), "goal_hint": q.goal_hint,
    }


def trace_record(result: Retrieval) -> dict[str, Any]:
    return {
        "schema": TRACE_SCHEMA,
        "repo": {"root": str(result.root), "base": result.base},
        "query": query_json(result.query),
        "references": [
            {k: v for k, v in ref.items() if k != "rank"} for ref in rendered_references(result)
        ],
        "diagnostics": [asdict(d) for d in result.diagnostics],
        "slice": {"digest": sha256_hex(result.context.text), "tokens": result.context.tokens,
                  "bytes": len(result.context.text.encode("utf-8"))},
        "manifest": manifest(result),
        "settings": result.settings.to_json(),
    }


def append_trace(result: Retrieval, path: Path) -> None:
    """Append the retrieval's record as one line; the file is created if missing."""
    line = json.dumps(trace_record(result), ensure_ascii=False, sort_keys=False)
    with path.open("a", encoding="utf-8") as trace:
        trace.write(line + "\n")
