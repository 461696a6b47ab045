"""Placing a candidate no signal weighs (``Recall.placed``) among the ranked ones."""

from __future__ import annotations

from dataclasses import replace

from ctx04_core.settings import Settings
from ctx04_core.stages.place import place
from ctx04_core.types import Candidate, Excerpt, RankedCandidate, Span


def ranked(*paths: str) -> list[RankedCandidate]:
    return [
        RankedCandidate(Candidate(Span(path, rank, rank), "function", f"m.f{rank}", ("ripgrep",)),
                        rank, 1.0 / rank)
        for rank, path in enumerate(paths, start=1)
    ]


CHANGES = Candidate(Span("CHANGES.md", 1, 15), "lines", None, ("changelog",))
NEWS = Candidate(Span("NEWS", 1, 15), "lines", None, ("changelog",))


def shown(items: tuple[RankedCandidate, ...]) -> list[tuple[int, str]]:
    return [(r.rank, r.candidate.span.path) for r in items]


def test_a_placed_file_comes_before_the_fifth_file_and_takes_no_ones_place() -> None:
    order = ranked("a.py", "a.py", "b.py", "c.py", "b.py", "d.py", "e.py", "f.py")
    placement = place(order, [CHANGES], Settings(top_k=8))
    assert shown(placement.ranked) == [
        (1, "a.py"), (2, "a.py"), (3, "b.py"), (4, "c.py"), (5, "b.py"), (6, "d.py"),
        (7, "CHANGES.md"), (8, "e.py"), (9, "f.py"),
    ]
    assert placement.placed_ranks == (7,)
    assert placement.ranked[6].candidate == CHANGES and placement.ranked[6].score == 0.0
    assert placement.ranked[6].model_score is None
    # The slice was planned without it: excerpts of ranks 7 on (a reserve's
    # rank 12 too) move one down, those before stay.
    excerpts = [Excerpt(r, ()) for r in (order[5], order[6], replace(order[7], rank=12))]
    assert [placement.renumbered(e).ranked.rank for e in excerpts] == [6, 8, 13]
    # Second file: before b.py's first candidate; two placed files, both.
    two = place(order, [CHANGES, NEWS], Settings(placed_file_position=2))
    assert shown(two.ranked)[:5] == [(1, "a.py"), (2, "a.py"), (3, "NEWS"), (4, "CHANGES.md"),
                                     (5, "b.py")]
    assert two.placed_ranks == (3, 4)
    assert [two.renumbered(e).ranked.rank for e in excerpts] == [8, 9, 14]


def test_nothing_moves_when_placing_is_off_or_the_file_is_ranked_already() -> None:
    order = ranked("a.py", "b.py", "c.py")
    assert place(order, [CHANGES], Settings(placed_file_position=0)).ranked == tuple(order)
    ranked_too = [*order, RankedCandidate(CHANGES, 4, 0.5)]
    kept = place(ranked_too, [CHANGES], Settings())
    assert (kept.ranked, kept.placed_ranks) == (tuple(ranked_too), ())
    # Fewer files than the position: last.
    assert shown(place(order, [CHANGES], Settings()).ranked) == [
        (1, "a.py"), (2, "b.py"), (3, "c.py"), (4, "CHANGES.md"),
    ]
