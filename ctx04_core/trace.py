"""The trace record: one JSON line per retrieval, appended to a file the caller names.

Built from the objects the retrieval already holds, never by reading files
again, so it records exactly what was rendered: the query terms, only the
references actually shown (with the text, so a harness can vet artifacts
against it later), the coverage diagnostics, the slice's digest, the full
candidate manifest, and, when a decision door was asked, its call
(``decision``) and, when it ranked, the selection record (``selection``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from ctx04_core.evidence import sha256_hex
from ctx04_core.pipeline import Retrieval
from ctx04_core.regular_file import open_regular_file
from ctx04_core.types import (
    SELECT_SITE,
    SOURCE_REF_SCHEMA,
    TRACE_SCHEMA,
    DecisionCall,
    Query,
    Selection,
    SourceRef,
)


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
            "shown_as": entry.excerpt.shown_as if entry and entry.included else None,
        })
    return records


def query_json(q: Query) -> dict[str, Any]:
    """The query's terms; ``descriptions`` only when a plugin added some (a model's),
    so a retrieval without them records what it recorded before they existed."""
    terms: dict[str, Any] = {
        "identifiers": list(q.identifiers), "unresolved": list(q.unresolved),
        "error_strings": list(q.error_strings), "test_names": list(q.test_names),
        "file_paths": list(q.file_paths), "goal_hint": q.goal_hint,
    }
    if q.descriptions:
        terms["descriptions"] = [{"text": d.text, "source": d.source} for d in q.descriptions]
    return terms


def decision_call_json(call: DecisionCall) -> dict[str, Any]:
    return {"site": SELECT_SITE, **asdict(call)}


def selection_json(selection: Selection) -> dict[str, Any]:
    """repository_context.selection: the judgment, what it saw, what it rests on."""
    return {
        "verdict": selection.verdict,
        "pick": list(selection.pick),
        "distribution": [{"option": o, "probability": p} for o, p in selection.distribution],
        "any_relevant": selection.any_relevant,
        "coverage": selection.coverage,
        "unranked": list(selection.unranked),
        "candidates": [{**asdict(record), "bound": bound}
                       for record, bound in selection.candidates],
        "omissions": [asdict(d) for d in selection.omissions],
        "identities": dict(selection.identities),
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
        **_door_record(result),
    }


def _door_record(result: Retrieval) -> dict[str, Any]:
    """The decision call when a door asked (or answered from its cache), and the
    selection when it ranked; nothing when nothing was asked."""
    decision = result.decision
    if decision is None or decision.call.outcome == "skipped":
        return {}
    record = {"decision": decision_call_json(decision.call)}
    if decision.selection is not None:
        record["selection"] = selection_json(decision.selection)
    return record


def trace_line(result: Retrieval) -> str:
    """The retrieval's record as one JSON Lines line."""
    return json.dumps(trace_record(result), ensure_ascii=False, sort_keys=False) + "\n"


def open_trace(path: Path) -> TextIO:
    """The trace file opened to append to, created if missing.

    Only a regular file: a FIFO would block the open until it has a reader,
    then every write until the reader reads. Raises ``OSError``
    (:class:`~ctx04_core.regular_file.NotRegularFile` for a FIFO, a device...).
    """
    descriptor = open_regular_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    return open(descriptor, "a", encoding="utf-8")


def append_trace(result: Retrieval, path: Path) -> None:
    """Append the retrieval's record as one line; the file is created if missing."""
    with open_trace(path) as trace:
        trace.write(trace_line(result))
