"""Identifier-weighted BM25 (spec §3.4), the one scorer every ranking stage uses.

score(d, q) = Σ_{t ∈ q∩d} w(t) · idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avgdl))
idf(t) = ln((N − n(t) + 0.5) / (n(t) + 0.5) + 1)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence

from ctx04_core.text import IDENTIFIER


def idf(n_docs: int, n_containing: int) -> float:
    return math.log((n_docs - n_containing + 0.5) / (n_containing + 0.5) + 1)


def term_weights(
    query_terms: Iterable[str], names_lower: Container[str], identifier_weight: float
) -> dict[str, float]:
    """w(t): ``identifier_weight`` for a term naming a definition, 1.0 for prose."""
    return {
        term: identifier_weight if IDENTIFIER.fullmatch(term) and term in names_lower else 1.0
        for term in query_terms
    }


def score(
    weights: Mapping[str, float],
    idfs: Mapping[str, float],
    tf: Mapping[str, int],
    length: int,
    avgdl: float,
    k1: float,
    b: float,
) -> float:
    """One document's score, given its term counts and a corpus's idf and avgdl.

    Split from :func:`bm25_scores` because the line prune scores a line
    against statistics of a different corpus than the line itself.
    """
    # An empty corpus (avgdl 0) has nothing to match, so its ratio is moot.
    ratio = length / avgdl if avgdl else 0.0
    norm = k1 * (1 - b + b * ratio)
    total = 0.0
    for term, weight in weights.items():
        count = tf.get(term, 0)
        if count:
            total += weight * idfs[term] * count * (k1 + 1) / (count + norm)
    return total


def bm25_scores(
    weights: Mapping[str, float],
    docs: Sequence[Sequence[str]],
    k1: float,
    b: float,
    idfs: Mapping[str, float] | None = None,
) -> list[float]:
    """The score of each token list in ``docs``; idf from ``idfs`` when given,
    else with ``docs`` itself as the corpus."""
    if not docs:
        return []
    counts = [Counter(doc) for doc in docs]
    avgdl = sum(len(doc) for doc in docs) / len(docs)
    if idfs is None:
        idfs = {term: idf(len(docs), sum(term in c for c in counts)) for term in weights}
    return [
        score(weights, idfs, tf, len(doc), avgdl, k1, b)
        for doc, tf in zip(docs, counts, strict=True)
    ]


def postings_scores(
    weights: Mapping[str, float],
    idfs: Mapping[str, float],
    postings: Mapping[str, Sequence[tuple[int, int]]],
    lengths: Sequence[int],
    k1: float,
    b: float,
) -> dict[int, float]:
    """:func:`score` of every document holding a query term, keyed by its number.

    ``postings`` gives each term's (document, count) pairs and ``lengths``
    each document's length. The same sums in the same order as ``score``
    (term by term, in ``weights`` order), so the floats are equal; but only
    the documents that hold a term are touched, and no count table is built
    per document: over thousands of commit messages sharing a word that was
    most of the cost.
    """
    avgdl = sum(lengths) / len(lengths) if lengths else 0.0
    norms = [k1 * (1 - b + b * (length / avgdl if avgdl else 0.0)) for length in lengths]
    totals: dict[int, float] = {}
    for term, weight in weights.items():
        term_weight = weight * idfs[term]
        for doc, count in postings.get(term, ()):
            gain = term_weight * count * (k1 + 1) / (count + norms[doc])
            totals[doc] = totals.get(doc, 0.0) + gain
    return totals
