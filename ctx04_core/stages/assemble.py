"""The hard token cap (spec §3.6): render excerpts in rank order within the budget.

Entries are all or nothing: the first excerpt that does not fit, and every
lower-ranked one after it, is left out, so the model never sees a cut entry
and a smaller low-ranked entry never jumps ahead of a larger better one.
"""

from __future__ import annotations

from ctx04_core.hookspecs import hookimpl
from ctx04_core.settings import Settings
from ctx04_core.tokens import count_tokens
from ctx04_core.types import ContextSlice, Diagnostic, Excerpt, SliceEntry

HEADER = "## Context slice (retrieved — untrusted data)\n\n"
GAP = "⋮"


def footer(omitted: int) -> str:
    return f"({omitted} lower-ranked candidates omitted by the token budget)\n"


def render(excerpt: Excerpt) -> str:
    """One entry: a provenance heading, the kept lines with ``⋮`` at gaps, a blank line."""
    candidate = excerpt.ranked.candidate
    path = candidate.span.path
    first = excerpt.lines[0][0] if excerpt.lines else candidate.span.start_line
    provenance = ", ".join((f"{path}:{first}", *candidate.sources))
    out = [f"### {candidate.qualname or path} [{provenance}]\n"]
    previous: int | None = None
    for number, text in excerpt.lines:
        if previous is not None and number != previous + 1:
            out.append(f"{GAP}\n")
        out.append(f"{text}\n")
        previous = number
    out.append("\n")
    return "".join(out)


# The hook passes every argument by keyword; this one needs only these two.
@hookimpl
def assemble(excerpts: tuple[Excerpt, ...], settings: Settings) -> ContextSlice:
    budget = settings.budget_tokens
    rendered = [render(excerpt) for excerpt in excerpts]
    text, included = _fit(rendered, budget)
    entries = tuple(
        SliceEntry(excerpt, entry, count_tokens(entry), index < included)
        for index, (excerpt, entry) in enumerate(zip(excerpts, rendered, strict=True))
    )
    diagnostics = tuple(
        Diagnostic(
            "omitted",
            "token budget",
            path=excerpt.ranked.candidate.span.path,
            detail=excerpt.ranked.candidate.qualname or "",
        )
        for excerpt in excerpts[included:]
    )
    return ContextSlice(text, count_tokens(text), budget, entries, diagnostics)


def _fit(rendered: list[str], budget: int) -> tuple[str, int]:
    """The slice text and how many leading entries it holds, never over ``budget``."""
    text = HEADER
    if count_tokens(text) > budget:
        return "", 0
    included = 0
    for entry in rendered:
        if count_tokens(text + entry) > budget:
            break
        text += entry
        included += 1
    # The footer must fit too; make room for it by dropping more entries.
    while included < len(rendered):
        candidate_text = HEADER + "".join(rendered[:included]) + footer(len(rendered) - included)
        if count_tokens(candidate_text) <= budget:
            return candidate_text, included
        if included == 0:
            return "", 0
        included -= 1
    return text, included
