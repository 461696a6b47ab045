"""Goal-scoped line prune (spec §3.5): keep the lines that serve the goal.

Each line is scored by the BM25 contribution of its tokens against the goal
(the goal hint's tokens and the query's identifiers). The corpus for idf is
the ranked candidates' own texts, so a term common to every candidate counts
for little; a line's length is compared with the mean of its candidate's
lines that have any token, so blank and bracket-only lines do not shorten it.
A candidate's best lines are those tying for its best score and the lines
the task points at (``Candidate.pointed_lines``: a stack frame's line, a
link's lines), whose words need not be the task's: the reporter read the
fault there (axios-5316 linked lines 236-251 of a 499-line function, which
showed its two best-matching lines elsewhere).

How the budget is spent is ``slice_shape``: ``"signatures"`` orients
(``stages/shapes.py``), ``"value"`` shows the code that must change as well
(``stages/value.py``, the default).

A candidate whose best line scores under ``prune_relative_floor`` of the
best line of all candidates is dropped whole: it shares little of the
goal, and its lines are noise. The first ``leader_ranks`` candidates are
exempt (only the absolute ``prune_floor`` drops them): the ranking weighs
evidence no single line shows (a stack frame, the repository's history, a
call from the leader), and what it ranks among the first must reach the
slice, where its shape decides how much of it is shown (a small
leading type whole: fmt's ``formatter`` specialisation ranked third, whose
lines the task's words hardly touch, held the change; held out, Loc-Bench
line recall +0.011, docs/benchmarks.md, stop 59).
"""

from __future__ import annotations

from collections import Counter

from ctx04_core.bm25 import idf, score, term_weights
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import SIGNATURES, Settings
from ctx04_core.stages.regions import own_text
from ctx04_core.stages.shapes import Shapes, signatures_shape
from ctx04_core.stages.value import value_shape
from ctx04_core.text import tokenize
from ctx04_core.types import Excerpt, Query, RankedCandidate


def goal_terms(query: Query) -> list[str]:
    parts = (query.goal_hint, *query.identifiers)
    return list(dict.fromkeys(term for part in parts for term in tokenize(part)))


@hookimpl
def prune(
    query: Query, ranked: tuple[RankedCandidate, ...], reserve: tuple[RankedCandidate, ...],
    repo: Repo, settings: Settings,
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
    floor = max(settings.prune_floor, settings.prune_relative_floor * top)
    shapes = []
    for item, text, scores in zip(ranked, texts, line_scores, strict=True):
        best = max(scores, default=0.0)
        # The floor weighs single lines, the ranking whole candidates: what
        # ranks among the leaders stays whenever a line of it serves the goal at all.
        leading = item.rank <= settings.leader_ranks
        if best < floor and not (leading and best > settings.prune_floor):
            continue
        shapes.append(Shapes(item, text, scores, repo, settings))
    if settings.slice_shape == SIGNATURES:
        return signatures_shape(shapes, ranked, settings)
    return value_shape(shapes, ranked, reserve, repo, settings)
