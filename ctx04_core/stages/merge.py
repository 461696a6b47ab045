"""Structure-aware dedup and merge of recalled candidates (spec §3.3).

Every hit ends up in one structural unit: the innermost definition of the
code index that contains it (the module node for a module-level line), or,
in a file the index did not parse, a run of lines merged with the runs it
overlaps or touches. Definitions never cut a statement, so neither do the
candidates built from them; runs exist only where the index has no
statement spans to widen them by.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from ctx04_core.repository import Repo
from ctx04_core.types import Candidate, Span

HIT = "line"  # a recall source's raw hit: one line, no qualname
RUN = "lines"  # lines of a file the index has no node for


def merge(candidates: Iterable[Candidate], repo: Repo) -> tuple[Candidate, ...]:
    units: dict[tuple[str, str | None, int, int], list[Candidate]] = {}
    runs: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        placed = _place(candidate, repo)
        span = placed.span
        if placed.kind == RUN:
            runs.setdefault(span.path, []).append(placed)
        else:
            key = (span.path, placed.qualname, span.start_line, span.end_line)
            units.setdefault(key, []).append(placed)
    merged = [_combine(group, group[0].span) for group in units.values()]
    for path, group in runs.items():
        merged.extend(_merge_runs(path, group))
    return tuple(
        sorted(
            merged,
            key=lambda c: (c.span.path, c.span.start_line, c.span.end_line, c.qualname or ""),
        )
    )


def _place(candidate: Candidate, repo: Repo) -> Candidate:
    """A raw hit moved to the definition containing it; anything else as given."""
    if candidate.kind != HIT:
        return candidate
    node = repo.index.innermost(candidate.span.path, candidate.span.start_line)
    if node is None:
        return replace(candidate, kind=RUN)
    return replace(candidate, span=node.span, kind=node.kind, qualname=node.qualname)


def _combine(group: Sequence[Candidate], span: Span) -> Candidate:
    """One candidate for ``span`` carrying every member's provenance, sources
    and terms each in sorted order: the members arrive in the order the recall
    plugins answer, which is the order the installation lists them in."""
    return replace(
        group[0],
        span=span,
        sources=tuple(sorted({s for c in group for s in c.sources})),
        terms=tuple(sorted({t for c in group for t in c.terms})),
        hit_lines=tuple(sorted({n for c in group for n in c.hit_lines})),
        recall_score=max(c.recall_score for c in group),
        pointed_at=any(c.pointed_at for c in group),
    )


def _merge_runs(path: str, group: list[Candidate]) -> list[Candidate]:
    """Union of overlapping or adjacent runs, each with its members' provenance."""
    spans = sorted((c.span.start_line, c.span.end_line, order) for order, c in enumerate(group))
    merged: list[Candidate] = []
    start, end, members = spans[0][0], spans[0][1], [spans[0][2]]
    for next_start, next_end, order in spans[1:]:
        if next_start <= end + 1:
            end = max(end, next_end)
            members.append(order)
            continue
        merged.append(_combine([group[i] for i in sorted(members)], Span(path, start, end)))
        start, end, members = next_start, next_end, [order]
    merged.append(_combine([group[i] for i in sorted(members)], Span(path, start, end)))
    return merged
