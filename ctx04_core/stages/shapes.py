"""The ways one candidate can be shown (whole, pruned to its best lines, or as
its signature), and the ``"signatures"`` slice, which orients.

The ``"signatures"`` slice (``slice_shape``) orients: the best-ranked
function or method, when it ranks within the first
``whole_function_within``, is kept whole (a class or module ranked above it
does not take its place; one too large for the budgets keeps its signature
and best lines), and every other function, method or type is shown as its
signature alone (``neighbours_as_signatures``). A candidate without a
signature (a module's own lines, a run of lines) keeps its best lines only
(the default ratio 1.0 keeps the lines that tie for its best score).
"""

from __future__ import annotations

from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_of, span_text
from ctx04_core.tokens import count_tokens
from ctx04_core.types import (
    FUNCTION_KINDS,
    PRUNED,
    SIGNATURE,
    TYPE_KINDS,
    WHOLE,
    Excerpt,
    RankedCandidate,
)

_SIGNED = FUNCTION_KINDS | TYPE_KINDS


class Shapes:
    """The ways one candidate can be shown: whole, pruned to its best lines, or
    as its signature, each as the excerpt it would be."""

    def __init__(
        self, item: RankedCandidate, text: list[tuple[int, str]], scores: list[float],
        repo: Repo, settings: Settings,
    ) -> None:
        self.item = item
        self.text = text
        self.lines = dict(text)
        # A type's text is its own lines; a small leading one may be shown as its span.
        self.span_text = _small_type_span(item, repo, settings)
        self.scores = scores
        self.signature = _signature(item, repo)
        self.statements = repo.index.multiline_statements(item.candidate.span.path)
        # The lines the task points at (a stack frame's, a link's) are shown
        # whatever their words: the reporter read them there.
        self.best_lines = self._scoring(settings.prune_ratio) | set(item.candidate.pointed_lines)
        self.settings = settings

    def whole(self) -> Excerpt:
        return Excerpt(self.item, tuple(self.text), WHOLE)

    def pruned(self) -> Excerpt:
        return self._kept(self.best_lines, PRUNED)

    def near_good_lines(self) -> Excerpt:
        """The best lines, and every line scoring at least ``leader_line_ratio``
        of the best, each with ``leader_line_context`` lines either side."""
        good = self._scoring(self.settings.leader_line_ratio)
        reach = self.settings.leader_line_context
        near = {n + step for n in good for step in range(-reach, reach + 1)}
        return self._kept(self.best_lines | near, PRUNED)

    def _scoring(self, ratio: float) -> set[int]:
        """The lines scoring at least ``ratio`` of this candidate's best line."""
        threshold = ratio * max(self.scores, default=0.0)
        return {n for (n, _), s in zip(self.text, self.scores, strict=True) if s >= threshold}

    def signature_only(self) -> Excerpt | None:
        """The signature alone; None for a candidate without one (a module, a run of lines)."""
        return self._kept(set(), SIGNATURE) if self.signature else None

    def _kept(self, kept: set[int], shown_as: str) -> Excerpt:
        grown = _whole_statements(kept, self.statements, self.settings.max_statement_lines)
        keep = (grown & self.lines.keys()) | self.signature
        # A stale index may place a signature past the end of the file as read.
        lines = tuple((n, self.lines[n]) for n in sorted(keep) if n in self.lines)
        # Best lines that are all signature lines are the signature.
        return Excerpt(self.item, lines, SIGNATURE if keep <= self.signature else shown_as)


def _small_type_span(
    item: RankedCandidate, repo: Repo, settings: Settings
) -> list[tuple[int, str]] | None:
    """A leading type's whole span when it may be shown so; else None."""
    span = item.candidate.span
    length = span.end_line - span.start_line + 1
    cap = settings.whole_body_max_lines
    if (
        item.rank > settings.leader_ranks or item.candidate.kind not in TYPE_KINDS
        or length > settings.type_span_max_lines or (cap is not None and length > cap)
    ):
        return None
    return span_text(item.candidate, repo) or None


def signatures_shape(
    shapes: list[Shapes], ranked: tuple[RankedCandidate, ...], settings: Settings
) -> list[Excerpt]:
    """The best-ranked function within ``whole_function_within`` whole (when it
    fits the budgets), every other definition as its signature
    (``neighbours_as_signatures``), other candidates as their best lines."""
    leaders = ranked[: settings.whole_function_within]
    whole_rank = next((r.rank for r in leaders if r.candidate.kind in FUNCTION_KINDS), 0)
    excerpts = []
    for shape in shapes:
        leading = shape.item.rank == whole_rank
        signature = shape.signature_only()
        if leading and _fits_whole(shape.text, settings):
            excerpts.append(shape.whole())
        elif not leading and settings.neighbours_as_signatures and signature is not None:
            excerpts.append(signature)
        else:
            excerpts.append(shape.pruned())
    return excerpts


# Of each budget, what a whole function may take: the rest is the slice's
# header, the excerpt's heading and the closing coverage line.
_WHOLE_SHARE = 0.9


def _fits_whole(text: list[tuple[int, str]], settings: Settings) -> bool:
    """True when the lines, shown whole, fit the token and byte budgets."""
    body = "\n".join(line for _, line in text)
    return (
        len(body.encode("utf-8")) <= _WHOLE_SHARE * settings.max_block_bytes
        and count_tokens(body) <= _WHOLE_SHARE * settings.budget_tokens
    )


def lines_shown(excerpts: list[Excerpt]) -> dict[str, set[int]]:
    """Per file, the lines the ``excerpts`` show (a file only when some do)."""
    shown: dict[str, set[int]] = {}
    for excerpt in excerpts:
        if excerpt.lines:
            shown.setdefault(excerpt.ranked.candidate.span.path, set()).update(
                n for n, _ in excerpt.lines
            )
    return shown


def _whole_statements(
    kept: set[int], statements: tuple[tuple[int, int], ...], max_lines: int
) -> set[int]:
    """Kept lines plus every line of each multi-line statement containing one.

    A statement longer than ``max_lines`` (a table of 60 tuples, a template
    string, ``__all__``) adds only its first line, which names it, as a
    signature does a body it leaves out: its other lines are data, and a
    matched word in one would pull in all of them.
    """
    grown = set(kept)
    for first, last in statements:
        if any(first <= n <= last for n in kept):
            grown.update(statement_lines(first, last, max_lines))
    return grown


def statement_lines(first: int, last: int, max_lines: int) -> range:
    """The lines a statement brings to an excerpt: all of them, or only the first
    when it is longer than ``max_lines`` (``settings.max_statement_lines``)."""
    return range(first, last + 1 if last - first < max_lines else first + 1)


def _signature(item: RankedCandidate, repo: Repo) -> set[int]:
    """Decorator and ``def``/``class`` header lines, kept whatever the body scores."""
    if item.candidate.kind not in _SIGNED:
        return set()
    node = node_of(item.candidate, repo)
    return set() if node is None else set(range(node.span.start_line, node.header_end + 1))
