"""Structure-aware dedup and merge of recalled candidates (spec §3.3).

Every hit ends up in one structural unit: the innermost definition of the
code index that contains it (the module node for a module-level line), or,
in a file the index did not parse, a run of lines merged with the runs it
overlaps or touches. Definitions never cut a statement, so neither do the
candidates built from them; runs exist only where the index has no
statement spans to widen them by.

A hit outside every function, on a run of comment lines that reaches the
next definition's first line, is that definition's: a doc comment and its
examples (a Javadoc, Ruby's ``# @example``, Rust's ``///``, a Go comment)
speak of what they document, though their lines lie in the class or module
around it. The container keeps such a hit only when it has no other
(without them, a module whose one hit documented a function would leave
the ranking with its file). Held out on the multilingual training tasks
this moved function Acc@10 (a container read as its members) 0.257 ->
0.268, MRR 0.416 -> 0.427, recall@5 0.361 -> 0.372; Python, where
docstrings are inside their function, did not move (docs/benchmarks.md,
"A doc comment's hits on what it documents").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ctx04_core.repository import Repo
from ctx04_core.types import FUNCTION_KINDS, Candidate, Node, Span

HIT = "line"  # a recall source's raw hit: one line, no qualname
RUN = "lines"  # lines of a file the index has no node for
# A line comment or a block comment's line in any parsed language; ``#``
# followed by a letter, ``[`` or ``!`` is C's preprocessor, an attribute or
# a shebang, not a comment.
COMMENT_LINE = re.compile(r"\s*(//|/\*|\*|#(?![A-Za-z\[!]))")
# A structural unit: path, qualname, first and last line.
_Unit = tuple[str, str | None, int, int]


def merge(candidates: Iterable[Candidate], repo: Repo) -> tuple[Candidate, ...]:
    units: dict[_Unit, list[Candidate]] = {}
    runs: dict[str, list[Candidate]] = {}
    # A container whose only hits document its members stays a candidate.
    documenting: dict[_Unit, list[Candidate]] = {}
    for candidate in candidates:
        placed, container = _place(candidate, repo)
        if placed.kind == RUN:
            runs.setdefault(placed.span.path, []).append(placed)
        else:
            units.setdefault(_unit(placed), []).append(placed)
        if container is not None:
            documenting.setdefault(_unit(container), []).append(container)
    for key, group in documenting.items():
        units.setdefault(key, group)
    merged = [_combine(group, group[0].span) for group in units.values()]
    for path, group in runs.items():
        merged.extend(_merge_runs(path, group))
    return tuple(
        sorted(
            merged,
            key=lambda c: (c.span.path, c.span.start_line, c.span.end_line, c.qualname or ""),
        )
    )


def _unit(candidate: Candidate) -> _Unit:
    span = candidate.span
    return span.path, candidate.qualname, span.start_line, span.end_line


def _place(candidate: Candidate, repo: Repo) -> tuple[Candidate, Candidate | None]:
    """A raw hit moved to the definition containing it, or to the one its
    comment documents (then with the container's placement beside it);
    anything else as given."""
    if candidate.kind != HIT:
        return candidate, None
    path, line = candidate.span.path, candidate.span.start_line
    node = repo.index.innermost(path, line)
    if node is None:
        return replace(candidate, kind=RUN), None
    placed = replace(candidate, span=node.span, kind=node.kind, qualname=node.qualname)
    documented = None if node.kind in FUNCTION_KINDS else _documented(path, line, repo)
    if documented is None:
        return placed, None
    moved = replace(
        candidate, span=documented.span, kind=documented.kind, qualname=documented.qualname
    )
    return moved, placed


def _documented(path: str, line: int, repo: Repo) -> Node | None:
    """The definition whose comment, written directly above it, holds ``line``.

    A comment above a definition speaks of it (a method's doc comment and its
    examples in most languages), though its lines lie in the container's."""
    source = repo.source(path)
    # Most hits outside functions are code: their own line settles it before
    # the file's definitions are scanned.
    if source is None or line > len(source.lines) or not COMMENT_LINE.match(
        source.lines[line - 1]
    ):
        return None
    following = next((n for n in repo.index.file_nodes(path) if n.span.start_line > line), None)
    if following is None:
        return None
    between = source.lines[line : following.span.start_line - 1]
    if all(COMMENT_LINE.match(text) for text in between):
        return following
    return None


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
        pointed_lines=tuple(sorted({n for c in group for n in c.pointed_lines})),
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
