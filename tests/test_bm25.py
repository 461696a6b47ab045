"""The §3.4 scorer on vectors worked out by hand."""

from __future__ import annotations

import math

import pytest

from ctx04_core.bm25 import bm25_scores, idf, postings_scores, score, term_weights

K1, B = 1.5, 0.75


def test_idf_formula() -> None:
    assert idf(10, 1) == pytest.approx(math.log(9.5 / 1.5 + 1))
    assert idf(3, 3) == pytest.approx(math.log(0.5 / 3.5 + 1))


def test_known_vectors() -> None:
    docs = [["a", "b"], ["a"], ["c", "c", "d"]]
    weights = {"a": 1.0, "c": 3.0, "z": 1.0}
    # N = 3, avgdl = 6/3 = 2; n(a) = 2, n(c) = 1, z appears nowhere.
    idf_a = math.log((3 - 2 + 0.5) / (2 + 0.5) + 1)
    idf_c = math.log((3 - 1 + 0.5) / (1 + 0.5) + 1)
    # |d| = 2: K = 1.5·(0.25 + 0.75·1) = 1.5
    doc0 = 1.0 * idf_a * 1 * 2.5 / (1 + 1.5)
    # |d| = 1: K = 1.5·(0.25 + 0.75·0.5) = 0.9375
    doc1 = 1.0 * idf_a * 1 * 2.5 / (1 + 0.9375)
    # |d| = 3, tf(c) = 2: K = 1.5·(0.25 + 0.75·1.5) = 2.0625
    doc2 = 3.0 * idf_c * 2 * 2.5 / (2 + 2.0625)
    assert bm25_scores(weights, docs, K1, B) == pytest.approx([doc0, doc1, doc2], rel=1e-12)


def test_empty_inputs() -> None:
    assert bm25_scores({"a": 1.0}, [], K1, B) == []
    assert bm25_scores({"a": 1.0}, [[], []], K1, B) == [0.0, 0.0]


def test_identifier_weight_needs_an_identifier_in_the_name_index() -> None:
    names = frozenset({"remember", "parse_args"})
    weights = term_weights(["remember", "parse_args", "memory", "42", "a-b"], names, 3.0)
    assert weights == {"remember": 3.0, "parse_args": 3.0, "memory": 1.0, "42": 1.0, "a-b": 1.0}


def test_symbol_match_outranks_comment_match() -> None:
    weights = term_weights(["remember", "memory"], frozenset({"remember"}), 3.0)
    symbol_doc = ["def", "remember", "self"]
    comment_doc = ["store", "memory", "here"]
    symbol, comment = bm25_scores(weights, [symbol_doc, comment_doc], K1, B)
    assert symbol == pytest.approx(3 * comment)


def test_rare_term_outranks_frequent_term() -> None:
    weights = {"rare": 1.0, "common": 1.0}
    docs = [["rare", "x"], ["common", "x"], ["common", "y"], ["common", "z"]]
    scores = bm25_scores(weights, docs, K1, B)
    assert scores[0] > scores[1] == scores[2] == scores[3] > 0


def test_scores_over_postings_equal_score_float_for_float() -> None:
    docs = [["parse", "date", "parse"], ["week"], ["date", "week", "iso", "number", "x"], []]
    weights = {"week": 1.0, "parse": 3.0, "date": 1.5, "absent": 2.0}
    idfs = {t: idf(len(docs), sum(t in d for d in docs)) for t in weights}
    postings: dict[str, list[tuple[int, int]]] = {}
    for i, doc in enumerate(docs):
        for term in dict.fromkeys(doc):
            postings.setdefault(term, []).append((i, doc.count(term)))
    lengths = [len(d) for d in docs]
    avgdl = sum(lengths) / len(lengths)
    found = postings_scores(weights, idfs, postings, lengths, 1.5, 0.75)
    # Only the documents holding a query term; each exactly score's float.
    assert found == {
        i: score(weights, idfs, {t: d.count(t) for t in d}, len(d), avgdl, 1.5, 0.75)
        for i, d in enumerate(docs) if set(d) & weights.keys()
    }
    assert sorted(found) == [0, 1, 2]
