"""The vetting gate (spec §3.7): check a model's artifact before it becomes state.

A harness calls :func:`vet` with an artifact the model emitted (an edit, a
command, a proposed tool) and the retrieved blocks the model was shown,
either the :class:`~ctx04_core.types.ContextSlice` of one retrieval or the
evidence of a whole session read back with :func:`evidence_from_trace`.
Every enabled ``vet`` hook implementation judges it; any rejection rejects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy

from ctx04_core.plugins import given_or_chosen
from ctx04_core.regular_file import open_regular_file
from ctx04_core.settings import Settings
from ctx04_core.types import SOURCE_REF_SCHEMA, TRACE_SCHEMA, ContextSlice, Evidence, SourceRef

# vet takes no settings, so the cap is read once from the setting's default.
MAX_ARTIFACT_BYTES = Settings().vet_max_artifact_bytes


class TraceError(ValueError):
    """A trace file that cannot be read, or a line of it that is not a valid record."""


class ArtifactTooLarge(ValueError):
    """An artifact over vet_max_artifact_bytes: refused, not vetted."""

    def __init__(self) -> None:
        super().__init__(
            f"the artifact is over vet_max_artifact_bytes ({MAX_ARTIFACT_BYTES} bytes): "
            "refused, not vetted"
        )


@dataclass(frozen=True)
class Verdict:
    """The gate's decision: accepted iff no enabled rule gave a reason to reject."""

    accepted: bool
    reasons: tuple[str, ...]  # distinct rejection reasons, sorted


def vet(
    artifact: str,
    retrieved: ContextSlice | Sequence[Evidence],
    *,
    disable: Iterable[str] = (),
    only: Iterable[str] | None = None,
    plugins: pluggy.PluginManager | None = None,
) -> Verdict:
    """Judge ``artifact`` against the blocks the model was shown.

    ``retrieved`` is a slice (its included entries' evidence is used; an
    entry the budget left out was never shown) or the evidence itself.
    ``disable`` / ``only`` choose plugins by entry-point name, as for
    ``retrieve``, or a long-lived process passes the ``plugins`` it loaded
    once (reading the entry points again costs more than a small check); with
    no ``vet`` implementation enabled everything passes.
    An artifact over :data:`MAX_ARTIFACT_BYTES` of UTF-8 raises
    :class:`ArtifactTooLarge` before any rule sees it.
    """
    # No character takes less than a byte, so a long text is refused uncounted.
    if len(artifact) > MAX_ARTIFACT_BYTES or (
        len(artifact.encode("utf-8", "surrogatepass")) > MAX_ARTIFACT_BYTES
    ):
        raise ArtifactTooLarge()
    if isinstance(retrieved, ContextSlice):
        evidence = tuple(entry.evidence for entry in retrieved.entries if entry.included)
    else:
        evidence = tuple(retrieved)
    pm = given_or_chosen(plugins, disable, only, "vet")
    # A collected hook leaves out the implementations that returned None, so
    # every result is a rejection reason.
    results: list[str] = pm.hook.vet(artifact=artifact, evidence=evidence)
    reasons = tuple(sorted(set(results)))
    return Verdict(accepted=not reasons, reasons=reasons)


def evidence_from_trace(path: Path) -> tuple[Evidence, ...]:
    """Every block recorded in a trace file: all the model was shown in the session.

    A trace is JSON Lines, one ``ctx04.repository-context.v1`` object per
    retrieval, whose ``references`` list holds ``ctx04.source-ref.v1``
    objects with the rendered ``text``. Blank lines are skipped. Blocks come
    back in file order, record by record.
    """
    try:
        with open(open_regular_file(path, os.O_RDONLY), encoding="utf-8") as trace:
            lines = trace.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"{path}: cannot read trace: {_one_line(error)}") from error
    evidence: list[Evidence] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceError(f"{path}:{number}: invalid JSON: {error.msg}") from error
        try:
            evidence.extend(_record_evidence(record))
        except ValueError as error:
            raise TraceError(f"{path}:{number}: {error}") from error
    return tuple(evidence)


def _record_evidence(record: Any) -> list[Evidence]:
    if not isinstance(record, dict) or record.get("schema") != TRACE_SCHEMA:
        found = record.get("schema") if isinstance(record, dict) else type(record).__name__
        raise ValueError(f"expected a {TRACE_SCHEMA} record, found {found!r}")
    references = record.get("references")
    if not isinstance(references, list):
        raise ValueError("'references' is not a list")
    return [_evidence(index, reference) for index, reference in enumerate(references)]


# The fields a source reference must carry, with the JSON types allowed.
REFERENCE_FIELDS: dict[str, tuple[type, ...]] = {
    "path": (str,), "start_line": (int,), "end_line": (int,), "content_digest": (str,),
    "excerpt_digest": (str,), "shortened": (bool,), "base": (str, type(None)), "text": (str,),
}


def _evidence(index: int, reference: Any) -> Evidence:
    where = f"references[{index}]"
    if not isinstance(reference, dict) or reference.get("schema") != SOURCE_REF_SCHEMA:
        raise ValueError(f"{where} is not a {SOURCE_REF_SCHEMA} object")
    for name, types in REFERENCE_FIELDS.items():
        value = reference.get(name)
        # bool is a subclass of int: a line number of `true` must not pass as 1.
        wrong_bool = isinstance(value, bool) and bool not in types
        if name not in reference or not isinstance(value, types) or wrong_bool:
            allowed = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise ValueError(f"{where}.{name} is missing or not {allowed}")
    ref = SourceRef(
        path=reference["path"],
        start_line=reference["start_line"],
        end_line=reference["end_line"],
        content_digest=reference["content_digest"],
        excerpt_digest=reference["excerpt_digest"],
        shortened=reference["shortened"],
        base=reference["base"],
    )
    return Evidence(ref=ref, text=reference["text"])


def _one_line(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return " ".join(str(error).split())
