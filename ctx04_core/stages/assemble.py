"""The hard caps (spec §3.6, source-references budgets): render excerpts in rank order.

Entries are all or nothing, never cut. The size caps (tokens, the block's
bytes, the headings' (references') bytes) keep a prefix of the ranking: the
first excerpt that would break one, and every lower-ranked one after it, is
left out, so a smaller low-ranked entry never jumps ahead of a better one.
An excerpt that breaks a size cap on its own (a C++ header's 4,000 module
lines) can never be shown and is left out first, so that it does not end
the prefix before anything is shown.
The compact profile's count budgets (paths, quoted lines, quoted bytes) skip
an entry that does not fit and try the next. The closing coverage line is
inside every cap, and every omission is a diagnostic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ctx04_core.evidence import (
    HEADER,
    coverage_summary,
    heading,
    quoted_lines,
    short_coverage,
    source_ref,
)
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.tokens import count_tokens
from ctx04_core.types import ContextSlice, Diagnostic, Evidence, Excerpt, SliceEntry


@dataclass(frozen=True)
class Rendered:
    excerpt: Excerpt
    heading: str
    quoted: str
    quoted_lines: int
    evidence: Evidence

    @property
    def text(self) -> str:
        return self.heading + self.quoted + "\n"


def render(excerpt: Excerpt, repo: Repo, settings: Settings) -> Rendered:
    quoted, shortened, n_lines = quoted_lines(excerpt, settings.max_line_bytes)
    source = repo.source(excerpt.ranked.candidate.span.path)
    # Prune only keeps excerpts of files it could read, so the source is there.
    digest = source.digest if source is not None else ""
    ref = source_ref(excerpt, quoted, shortened, digest, repo.base)
    return Rendered(excerpt, heading(excerpt, ref), quoted, n_lines, Evidence(ref, quoted))


@hookimpl
def assemble(
    excerpts: tuple[Excerpt, ...],
    diagnostics: tuple[Diagnostic, ...],
    repo: Repo,
    settings: Settings,
) -> ContextSlice:
    rendered = [render(excerpt, repo, settings) for excerpt in excerpts]
    fitting, skipped = _within_counts(rendered, settings)
    # Room for the longest short coverage line any choice can need: every
    # excerpt omitted gives the largest counts.
    every_omission = tuple(Diagnostic("omitted", "") for _ in rendered)
    reserve = short_coverage(diagnostics + every_omission)
    too_large = {id(r): cap for r in fitting if (cap := _broken_cap([r], reserve, settings))}
    skipped.update(too_large)
    fitting = [r for r in fitting if id(r) not in too_large]
    included, reason = len(fitting), ""
    while included >= 0 and (broken := _broken_cap(fitting[:included], reserve, settings)):
        reason = broken  # the cap the next entry would break names every omission
        included -= 1
    included = max(included, 0)
    while True:
        chosen = fitting[:included]
        shown = {id(r) for r in chosen}
        omitted = tuple(
            _omission(r, skipped.get(id(r), reason)) for r in rendered if id(r) not in shown
        )
        text = _closed(HEADER + "".join(r.text for r in chosen), diagnostics + omitted, settings)
        if text or not included:
            break
        # The reserve is the short line of every excerpt omitted, and the line
        # of fewer omissions can be longer ("nothing cut or refused"): when
        # the real closing does not fit, one entry fewer leaves it room.
        reason = _broken_cap(chosen, short_coverage(diagnostics + omitted), settings) or reason
        included -= 1
    entries = tuple(
        SliceEntry(r.excerpt, r.text, count_tokens(r.text), id(r) in shown and bool(text),
                   r.evidence)
        for r in rendered
    )
    return ContextSlice(
        text, count_tokens(text), settings.budget_tokens, entries, diagnostics + omitted
    )


def _omission(rendered: Rendered, reason: str) -> Diagnostic:
    qualname = rendered.excerpt.ranked.candidate.qualname or ""
    return Diagnostic("omitted", reason, rendered.evidence.ref.path, qualname)


def _within_counts(
    rendered: list[Rendered], settings: Settings
) -> tuple[list[Rendered], dict[int, str]]:
    """The entries, in rank order, that the compact profile's count budgets admit.

    These budgets bound how much is quoted, not which rank matters: an entry
    that would break one is skipped and the next is tried, so one long
    excerpt does not empty the slice. Returns the admitted entries and, by
    ``id``, the budget each skipped entry would have broken.
    """
    admitted: list[Rendered] = []
    skipped: dict[int, str] = {}
    for entry in rendered:
        trial = [*admitted, entry]
        limits: list[tuple[str, int | None, int]] = [
            ("paths budget", settings.max_paths, len({r.evidence.ref.path for r in trial})),
            ("line budget", settings.max_quoted_lines, sum(r.quoted_lines for r in trial)),
            ("quoted-text budget", settings.max_quoted_bytes,
             sum(utf8_bytes(r.quoted) for r in trial)),
        ]
        broken = next((name for name, limit, used in limits if limit is not None and used > limit),
                      None)
        if broken is None:
            admitted.append(entry)
        else:
            skipped[id(entry)] = broken
    return admitted, skipped


def _broken_cap(chosen: Sequence[Rendered], reserve: str, settings: Settings) -> str | None:
    """The first size cap the chosen entries, with ``reserve`` closing them, break."""
    body = HEADER + "".join(r.text for r in chosen) + reserve
    if sum(utf8_bytes(r.heading) for r in chosen) > settings.max_reference_bytes:
        return "references budget"
    if utf8_bytes(body) > settings.max_block_bytes:
        return "byte budget"
    if count_tokens(body) > settings.budget_tokens:
        return "token budget"
    return None


def _closed(body: str, diagnostics: tuple[Diagnostic, ...], settings: Settings) -> str:
    """``body`` with the coverage line that fits: the full summary, else the short one.

    The entries were chosen with room for a short line; the full one is used
    when it fits too. Only when even the header does not fit is the slice empty.
    """
    for closing in (coverage_summary(diagnostics), short_coverage(diagnostics)):
        text = body + closing
        fits_bytes = utf8_bytes(text) <= settings.max_block_bytes
        if fits_bytes and count_tokens(text) <= settings.budget_tokens:
            return text
    return ""


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))
