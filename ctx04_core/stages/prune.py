"""Goal-scoped line prune (spec §3.5): keep the lines that serve the goal.

Each line is scored by the BM25 contribution of its tokens against the goal
(the goal hint's tokens and the query's identifiers). The corpus for idf is
the ranked candidates' own texts, so a term common to every candidate counts
for little; a line's length is compared with the mean of its candidate's
lines that have any token, so blank and bracket-only lines do not shorten it.

A function or method ranked in the first ``whole_function_ranks`` is kept
whole: it is the likeliest place of the change, and a reader needs all of it.
Every other candidate keeps its signature and its best lines only (the
default ratio 1.0 keeps the lines that tie for its best score): measured on
the dev split, a wider prune of the rest spends the budget on lines that
are rarely the ones that matter. A candidate whose best line scores under
``prune_relative_floor`` of the best line of all candidates is dropped
whole: it shares little of the goal, and its lines are noise.
"""

from __future__ import annotations

from collections import Counter

from ctx04_core.bm25 import idf, score, term_weights
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_of, own_text
from ctx04_core.text import tokenize
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
    names = frozenset(name.lower() for name in repo.index.names())
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
    floor = max(settings.prune_floor, settings.prune_relative_floor * top)
    excerpts = []
    for item, text, scores in zip(ranked, texts, line_scores, strict=True):
        best = max(scores, default=0.0)
        if best < floor:
            continue
        if item.rank <= settings.whole_function_ranks and item.candidate.kind in FUNCTION_KINDS:
            kept = {n for n, _ in text}
        else:
            threshold = settings.prune_ratio * best
            kept = {n for (n, _), s in zip(text, scores, strict=True) if s >= threshold}
        statements = repo.index.multiline_statements(item.candidate.span.path)
        lines = dict(text)
        keep = (_whole_statements(kept, statements) & lines.keys()) | _signature(item, repo)
        # A stale index may place a signature past the end of the file as read.
        excerpts.append(Excerpt(item, tuple((n, lines[n]) for n in sorted(keep) if n in lines)))
    return excerpts


def _whole_statements(kept: set[int], statements: tuple[tuple[int, int], ...]) -> set[int]:
    """Kept lines plus every line of each multi-line statement containing one."""
    grown = set(kept)
    for first, last in statements:
        if any(first <= n <= last for n in kept):
            grown.update(range(first, last + 1))
    return grown


def _signature(item: RankedCandidate, repo: Repo) -> set[int]:
    """Decorator and ``def``/``class`` header lines, kept whatever the body scores."""
    if item.candidate.kind not in _SIGNED:
        return set()
    node = node_of(item.candidate, repo)
    return set() if node is None else set(range(node.span.start_line, node.header_end + 1))
