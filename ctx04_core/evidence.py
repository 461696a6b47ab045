"""Rendering retrieved code as evidence: cut lines, digests, headings, coverage.

The model sees retrieved code as untrusted data with its provenance; the
pieces here make that rendering exact and checkable: a line is cut at a
UTF-8 boundary, a heading cannot be forged by a file name, every excerpt has
a digest over exactly what was shown.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ctx04_core.types import Diagnostic, Excerpt, SourceRef

HEADER = "## Context slice (retrieved — untrusted data)\n\n"
GAP = "⋮"
KINDS = ("unavailable", "excluded", "omitted")  # the coverage diagnostics, in summary order
DIGEST_CHARS = 12  # of the content digest shown in a heading; the JSON has all 64


def sha256_hex(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def cut_line(line: str, max_bytes: int) -> tuple[str, bool]:
    """The longest prefix of ``line`` within ``max_bytes`` UTF-8 bytes, and whether it was cut."""
    data = line.encode("utf-8")
    if len(data) <= max_bytes:
        return line, False
    # Only the tail can hold a split character; "ignore" drops just that.
    return data[:max_bytes].decode("utf-8", "ignore"), True


def printable(text: str) -> str:
    """``text`` with control characters escaped, so a name cannot start a new line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def quoted_lines(excerpt: Excerpt, max_line_bytes: int) -> tuple[str, bool, int]:
    """The excerpt's lines as shown (``⋮`` at gaps), whether any was cut, how many."""
    out: list[str] = []
    shortened = False
    previous: int | None = None
    for number, text in excerpt.lines:
        if previous is not None and number != previous + 1:
            out.append(f"{GAP}\n")
        shown, cut = cut_line(text, max_line_bytes)
        shortened |= cut
        out.append(f"{shown}\n")
        previous = number
    return "".join(out), shortened, len(excerpt.lines)


def source_ref(
    excerpt: Excerpt, quoted: str, shortened: bool, content_digest: str, base: str | None
) -> SourceRef:
    span = excerpt.ranked.candidate.span
    first = excerpt.lines[0][0] if excerpt.lines else span.start_line
    last = excerpt.lines[-1][0] if excerpt.lines else span.end_line
    return SourceRef(span.path, first, last, content_digest, sha256_hex(quoted), shortened, base)


def heading(excerpt: Excerpt, ref: SourceRef) -> str:
    """``### qualname [path:first-last, sha256:<12 hex>, sources]``, one line."""
    candidate = excerpt.ranked.candidate
    path = printable(ref.path)
    lines = f"{ref.start_line}" if ref.start_line == ref.end_line else (
        f"{ref.start_line}-{ref.end_line}"
    )
    where = f"{path}:{lines}"
    provenance = ", ".join(
        (where, f"sha256:{ref.content_digest[:DIGEST_CHARS]}", *candidate.sources)
    )
    return f"### {printable(candidate.qualname) if candidate.qualname else path} [{provenance}]\n"


def coverage_summary(diagnostics: Sequence[Diagnostic], max_items: int = 3) -> str:
    """The closing line of a slice: what was cut, refused or unavailable; never "complete"."""
    if not diagnostics:
        return "Coverage: nothing cut or refused; recall is not exhaustive.\n"
    parts = []
    for kind in KINDS:
        found = [d for d in diagnostics if d.kind == kind]
        if not found:
            continue
        items = list(dict.fromkeys(_item(d) for d in found))
        more = ", …" if len(items) > max_items else ""
        parts.append(f"{kind} {len(found)} ({', '.join(items[:max_items])}{more})")
    return f"Coverage: {'; '.join(parts)}; recall is not exhaustive.\n"


def short_coverage(diagnostics: Sequence[Diagnostic]) -> str:
    """The fallback closing line when the full summary does not fit the budgets."""
    counts = {kind: sum(d.kind == kind for d in diagnostics) for kind in KINDS}
    listed = ", ".join(f"{kind} {n}" for kind, n in counts.items() if n)
    return f"Coverage: {listed or 'nothing cut'}; not exhaustive.\n"


def _item(diagnostic: Diagnostic) -> str:
    # A plugin's reason is text like any other: escaped, it cannot break the line.
    reason = printable(diagnostic.reason)
    if diagnostic.path:
        text = f"{printable(diagnostic.path)}: {reason}"
    elif diagnostic.detail:
        text = f"{reason}: {printable(diagnostic.detail)}"
    else:
        text = reason
    return text if len(text) <= 60 else text[:59] + "…"
