"""``ctx04 gaps``' two readings of eval records: where the gold lines are, and
what each rank's shown lines hold. The records are written out here, each
number below counted by hand from them; ``tests/test_bench_cli.py`` reads
records a real ``ctx04 eval`` wrote."""

from __future__ import annotations

from typing import Any

import pytest

from ctx04_core.bench.gaps import PLACES, RankGroup, by_rank, places


def candidate(rank: int, path: str, start: int, end: int) -> dict[str, Any]:
    return {"rank": rank, "path": path, "start_line": start, "end_line": end}


def shown(path: str, rank: int | None, *runs: tuple[int, int]) -> dict[str, Any]:
    return {"path": path, "rank": rank, "lines": [list(run) for run in runs]}


def gold(lines: dict[str, list[int]]) -> dict[str, Any]:
    return {"files": sorted(lines), "lines": lines, "symbols": []}


# Five gold lines, one in each of five places (a.py 5: the first candidate's
# span, not shown; a.py 20: shown; a.py 40: rank 7's span; a.py 60: a shown
# file, no span; b.py 3: a ranked file the slice does not show). a.py 20 is
# shown twice, by rank 2 and among lines of no candidate.
FIVE_PLACES = {
    "gold": gold({"a.py": [5, 20, 40, 60], "b.py": [3]}),
    "ranked": [
        candidate(1, "a.py", 1, 10), candidate(2, "a.py", 15, 30), candidate(6, "c.py", 1, 50),
        candidate(7, "a.py", 35, 45), candidate(8, "b.py", 10, 12),
    ],
    "shown": [
        shown("a.py", 1, (1, 4)), shown("a.py", 2, (20, 20)), shown("c.py", 6, (1, 1)),
        shown("d.py", None, (7, 8)), shown("a.py", None, (20, 20)),
    ],
}
# Two gold lines: rank 3's span holds a.py 17, no candidate is in e.py.
TWO_PLACES = {
    "gold": gold({"a.py": [17], "e.py": [1]}),
    "ranked": [candidate(1, "a.py", 1, 10), candidate(3, "a.py", 15, 30)],
    "shown": [shown("a.py", 1, (1, 2))],
}
FAILED = {"gold": None, "ranked": [], "shown": []}
RECORDS = [FIVE_PLACES, TWO_PLACES, FAILED]


def test_each_gold_line_counts_once_in_the_first_place_that_holds_it() -> None:
    fifth, half = 1 / 5 / 3, 1 / 2 / 3
    assert places(RECORDS) == pytest.approx({
        "shown": fifth, "first candidate": fifth, "ranks 2-5": half, "past rank 5": fifth,
        "member of a ranked container": 0.0, "shown file, no candidate": fifth,
        "ranked file, not shown": fifth, "no candidate's file": half,
    })
    # The failed instance adds nothing, as it adds nothing to line recall.
    assert sum(places(RECORDS).values()) == pytest.approx(2 / 3)
    assert places([]) == dict.fromkeys(PLACES, 0.0)


def symbol(path: str, qualname: str, kind: str, *runs: tuple[int, int]) -> dict[str, Any]:
    return {"path": path, "qualname": qualname, "kind": kind, "region": [list(r) for r in runs]}


def test_a_class_or_module_holds_only_its_own_gold_lines() -> None:
    # m.py: the module's own lines are 1-9 and 60-70 (import at 3), class C
    # 10-59 with own lines 10-19 and 41-59 (attribute at 12), methods C.f
    # 20-30 (gold line 25) and C.g 31-40 (gold line 35). Ranked: the module
    # first, C third, C.g eighth; C.f is no candidate. Nothing is shown.
    record = {
        "gold": {
            "files": ["m.py"], "lines": {"m.py": [3, 12, 25, 35]},
            "symbols": [
                symbol("m.py", "m", "module", (1, 9), (60, 70)),
                symbol("m.py", "m.C", "class", (10, 19), (41, 59)),
                symbol("m.py", "m.C.f", "method", (20, 30)),
                symbol("m.py", "m.C.g", "method", (31, 40)),
            ],
        },
        "ranked": [
            {**candidate(1, "m.py", 1, 70), "kind": "module", "qualname": "m"},
            {**candidate(3, "m.py", 10, 59), "kind": "class", "qualname": "m.C"},
            {**candidate(8, "m.py", 31, 40), "kind": "method", "qualname": "m.C.g"},
        ],
        "shown": [],
    }
    # 3: the module's own; 12: the class's own (the module's span holds it,
    # as a member's line); 35: C.g's, eighth; 25: C.f's, inside both
    # containers and held by neither.
    assert places([record]) == pytest.approx({
        **dict.fromkeys(PLACES, 0.0), "first candidate": 1 / 4, "ranks 2-5": 1 / 4,
        "past rank 5": 1 / 4, "member of a ranked container": 1 / 4,
    })


def test_shown_lines_by_the_rank_of_their_candidate() -> None:
    # Relevant lines are those within 15 of a gold line (no gold symbol here):
    # a.py 1-75 and b.py 1-18 in the first record, a.py 2-32 and e.py 1-16 in
    # the second. Rank 1 shows a.py 1-4 and a.py 1-2 (line 1 of the second
    # record is 16 lines from its gold line 17); rank 2 shows gold line a.py
    # 20, which lines of no candidate show again (credited once, to rank 2);
    # c.py has no gold and d.py neither.
    assert by_rank(RECORDS) == [
        RankGroup("1", 6 / 3, pytest.approx(1 / 6), 0.0),
        RankGroup("2-3", 1 / 3, 0.0, pytest.approx(1 / 5 / 3)),
        RankGroup("4-5", 0.0, None, 0.0),
        RankGroup("6-10", 1 / 3, 1.0, 0.0),
        RankGroup("11-20", 0.0, None, 0.0),
        RankGroup("past 20", 0.0, None, 0.0),
        RankGroup("reserve", 0.0, None, 0.0),
        RankGroup("head", 0.0, None, 0.0),
        RankGroup("called", 0.0, None, 0.0),
        RankGroup("no candidate", 3 / 3, pytest.approx(2 / 3), 0.0),
    ]


def test_lines_added_beside_the_candidates_by_what_they_are() -> None:
    # One gold line, a.py 30; rank 1 shows a.py 1-2 (far from it), the head
    # a.py 1-3 again (credited nowhere: no gold), a reserve function a.py
    # 28-31 (the gold line, and 3 relevant lines), a called signature b.py 5.
    record = {
        "gold": gold({"a.py": [30]}),
        "ranked": [candidate(1, "a.py", 1, 10)],
        "shown": [
            shown("a.py", 1, (1, 2)),
            {**shown("a.py", None, (1, 3)), "extra": "head"},
            {**shown("a.py", None, (28, 31)), "extra": "reserve"},
            {**shown("b.py", None, (5, 5)), "extra": "called"},
        ],
    }
    groups = {g.name: g for g in by_rank([record]) or []}
    assert groups["1"] == RankGroup("1", 2.0, 1.0, 0.0)
    assert groups["head"] == RankGroup("head", 3.0, 1.0, 0.0)
    assert groups["reserve"] == RankGroup("reserve", 4.0, 0.0, 1.0)
    assert groups["called"] == RankGroup("called", 1.0, 1.0, 0.0)
    assert groups["no candidate"] == RankGroup("no candidate", 0.0, None, 0.0)


def test_records_without_ranks_on_their_shown_lines_give_no_rank_table() -> None:
    old = {**TWO_PLACES, "shown": [{"path": "a.py", "lines": [[1, 2]]}]}
    assert by_rank([FIVE_PLACES, old]) is None
    assert places([old])["shown"] == 0.0
