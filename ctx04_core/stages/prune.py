"""Goal-scoped line prune (spec §3.5): keep the lines that serve the goal.

Each line is scored by the BM25 contribution of its tokens against the goal
(the goal hint's tokens and the query's identifiers). The corpus for idf is
the ranked candidates' own texts, so a term common to every candidate counts
for little; a line's length is compared with the mean of its candidate's
lines that have any token, so blank and bracket-only lines do not shorten it.

The best-ranked function or method, when it ranks within the first
``whole_function_within``, is kept whole: it is the likeliest place of the
change, and a reader needs all of it; a class or module ranked above it
(``Cart`` above ``Cart.total``) does not take its place. A leading function
too large for the slice's budgets (tokens, bytes) would be left out whole by
the token cap: it keeps its signature and best lines instead.
Every other function, method or type is shown as its signature alone
(``neighbours_as_signatures``): a map of where else to look, one or two
lines each. Measured on the dev split, the rank-1 entry holds most of the
lines a change touches and a neighbour's best lines rarely do (a matched
docstring kept whole was the typical neighbour excerpt); signatures cut the
tokens by a third and let more neighbours into the budget. A candidate
without a signature (a module's own lines, a run of lines) keeps its best
lines only (the default ratio 1.0 keeps the lines that tie for its best
score). A candidate whose best line scores under
``prune_relative_floor`` of the best line of all candidates is dropped
whole: it shares little of the goal, and its lines are noise. The rank-1
candidate is exempt (only the absolute ``prune_floor`` drops it): the
ranking weighs evidence no single line shows (a stack frame, the
repository's history), and what it ranks first must reach the slice.
"""

from __future__ import annotations

from collections import Counter

from ctx04_core.bm25 import idf, score, term_weights
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_of, own_text
from ctx04_core.text import tokenize
from ctx04_core.tokens import count_tokens
from ctx04_core.types import FUNCTION_KINDS, TYPE_KINDS, Excerpt, Query, RankedCandidate

_SIGNED = FUNCTION_KINDS | TYPE_KINDS


def goal_terms(query: Query) -> list[str]:
    parts = (query.goal_hint, *query.identifiers)
    return list(dict.fromkeys(term for part in parts for term in tokenize(part)))


@hookimpl
def prune(
    query: Query, ranked: tuple[RankedCandidate, ...], repo: Repo, settings: Settings
) -> list[Excerpt]:
    texts = [own_text(r.candidate, repo) for r in ranked]
    tokens = [[tokenize(line) for _, line in text] for text in texts]
    names = repo.index.defined(lower=True)
    weights = term_weights(goal_terms(query), names, settings.identifier_weight)
    seen_in = [frozenset(t for line in lines for t in line) for lines in tokens]
    idfs = {term: idf(len(ranked), sum(term in s for s in seen_in)) for term in weights}
    k1, b = settings.bm25_k1, settings.bm25_b
    line_scores = []
    for line_tokens in tokens:
        lengths = [len(t) for t in line_tokens if t]
        avgdl = sum(lengths) / len(lengths) if lengths else 0.0
        line_scores.append(
            [score(weights, idfs, Counter(t), len(t), avgdl, k1, b) for t in line_tokens]
        )
    top = max((max(s, default=0.0) for s in line_scores), default=0.0)
    leaders = ranked[: settings.whole_function_within]
    whole_rank = next((r.rank for r in leaders if r.candidate.kind in FUNCTION_KINDS), 0)
    floor = max(settings.prune_floor, settings.prune_relative_floor * top)
    excerpts = []
    for item, text, scores in zip(ranked, texts, line_scores, strict=True):
        best = max(scores, default=0.0)
        # The floor weighs single lines, the ranking whole candidates: what
        # ranks first stays whenever a line of it serves the goal at all.
        if best < floor and not (item.rank == 1 and best > settings.prune_floor):
            continue
        leading = item.rank == whole_rank
        if leading and _fits_whole(text, settings):
            kept = {n for n, _ in text}
        elif not leading and settings.neighbours_as_signatures and item.candidate.kind in _SIGNED:
            kept = set()  # the signature alone, added below
        else:
            threshold = settings.prune_ratio * best
            kept = {n for (n, _), s in zip(text, scores, strict=True) if s >= threshold}
        statements = repo.index.multiline_statements(item.candidate.span.path)
        lines = dict(text)
        grown = _whole_statements(kept, statements, settings.max_statement_lines)
        keep = (grown & lines.keys()) | _signature(item, repo)
        # A stale index may place a signature past the end of the file as read.
        excerpts.append(Excerpt(item, tuple((n, lines[n]) for n in sorted(keep) if n in lines)))
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
