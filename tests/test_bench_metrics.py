"""Every metric's exact value on hand-built ranked lists; the §7.4 and ablation rules."""

from __future__ import annotations

from typing import Any

import pytest

from ctx04_core.bench.compare import (
    E2E_NOT_RUN,
    ab_decision,
    ablation_verdict,
    beyond_noise,
    delta_interval,
    pair,
    sign_test,
)
from ctx04_core.bench.gold import Gold, GoldSymbol
from ctx04_core.bench.metrics import (
    FAILED,
    METRICS,
    Answer,
    RankedItem,
    Shown,
    Symbol,
    nearest_rank,
    score,
    summarise,
    summarise_by_language,
)

GOLD = Gold(
    files=("a.py", "b.py"),
    lines={"a.py": (10,), "b.py": (50,)},
    symbols=(
        GoldSymbol("a.py", "a.f", "function", ((5, 20),)),
        GoldSymbol("b.py", "b.C.m", "method", ((40, 60),)),
    ),
)


def item(rank: int, path: str, qualname: str | None, included: bool) -> RankedItem:
    return RankedItem(rank, path, 1, 2, qualname, "lines" if qualname is None else "function",
                      included)


RANKED = (
    item(1, "c.py", "c.x", True),
    item(2, "a.py", "a.f", True),
    item(3, "a.py", "a.g", True),
    item(4, "d.py", None, True),  # lines of a file that does not parse: symbol (d.py, None)
    item(5, "c.py", "c.y", False),
    item(6, "b.py", "b.C.m", False),
)
SHOWN = (
    Shown("c.py", tuple(range(1, 11))),  # 10 lines of a file with no gold
    Shown("a.py", (8, 9, 10, 11, 12)),  # inside a.f
    Shown("a.py", (24, 25, 26, 27)),  # 24, 25 within 15 lines of gold line 10
    Shown("d.py", (1, 2)),
)


def nothing_inside(item: RankedItem) -> tuple[Symbol, ...]:
    return ()


def test_every_metric_exactly() -> None:
    values = score(GOLD, Answer(RANKED, SHOWN, tokens=123, seconds=0.5, index_seconds=0.1),
                   nothing_inside)
    assert values == {
        "file_acc@1": 0.0,  # distinct files in rank order: c, a, d, b
        "file_acc@5": 1.0,
        "file_acc@10": 1.0,
        "function_acc@5": 0.0,  # b.C.m is the 6th distinct symbol
        "function_acc@10": 1.0,
        "function_acc_read@5": 0.0,  # no container: read as ranked
        "function_acc_read@10": 1.0,
        "recall@1": 0.0,
        "recall@3": 0.5,
        "recall@5": 0.5,
        "mrr": 0.5,
        "required_file_recall": 0.5,  # b.py is ranked but not shown
        "required_symbol_recall": 0.5,
        "line_recall": 0.5,  # a.py 10 is shown, b.py 50 is not
        "line_recall@1": 0.0,  # every span is lines 1-2
        "line_recall@3": 0.0,
        "line_recall@5": 0.0,
        "irrelevant_context_ratio": 14 / 21,  # 10 (c.py) + 2 (a.py 26, 27) + 2 (d.py)
        "tokens": 123.0,
    }
    assert list(values) == list(METRICS)


def test_ranks_are_read_in_rank_order() -> None:
    shuffled = tuple(reversed(RANKED))
    assert score(GOLD, Answer(shuffled, SHOWN, 123, 0.5, None), nothing_inside) == score(
        GOLD, Answer(RANKED, SHOWN, 123, 0.5, None), nothing_inside
    )


def test_nothing_shown_and_nothing_found() -> None:
    values = score(GOLD, Answer((item(1, "z.py", "z.q", False),), (), 0, 0.1, None),
                   nothing_inside)
    assert values == {**FAILED, "irrelevant_context_ratio": 1.0}


def test_a_file_symbol_is_found_by_a_candidate_without_qualname() -> None:
    gold = Gold(("x.txt",), {"x.txt": (3,)}, (GoldSymbol("x.txt", None, "file", ((1, 9),)),))
    values = score(gold, Answer((item(1, "x.txt", None, True),), (Shown("x.txt", (1, 40)),), 7,
                                0.1, None), nothing_inside)
    assert (values["function_acc@5"], values["mrr"], values["required_symbol_recall"]) == (
        1.0, 1.0, 1.0
    )
    assert values["irrelevant_context_ratio"] == 0.5  # line 40 is 37 lines from line 3


def test_a_container_is_read_as_the_definitions_inside_it() -> None:
    inside = {
        # In line order, as the gold's parser gives them.
        ("b.py", "b"): [("b.py", "b.C"), ("b.py", "b.C.k"), ("b.py", "b.C.m")],
        ("c.py", "c.C"): [("c.py", f"c.C.m{i}") for i in range(6)],
    }

    def covered(ranked: RankedItem) -> list[Symbol]:
        return inside[ranked.symbol]

    module = RankedItem(1, "b.py", 1, 100, "b", "module", True)
    function = RankedItem(2, "a.py", 5, 20, "a.f", "function", True)
    values = score(GOLD, Answer((module, function), (), 0, 0.1, None), covered)
    # Read: b, b.C, b.C.k, b.C.m, a.f; ranked: b, a.f.
    assert (values["function_acc@5"], values["function_acc_read@5"]) == (0.0, 1.0)
    assert (values["line_recall@1"], values["line_recall@3"]) == (0.5, 1.0)
    assert values["line_recall"] == 0.0
    # A class of six methods ahead of the function pushes it out of the first 5.
    big = RankedItem(1, "c.py", 1, 90, "c.C", "class", True)
    second = RankedItem(2, "a.py", 5, 20, "a.f", "function", True)
    third = RankedItem(3, "b.py", 40, 60, "b.C.m", "method", True)
    values = score(GOLD, Answer((big, second, third), (), 0, 0.1, None), covered)
    assert (values["function_acc@5"], values["function_acc_read@5"],
            values["function_acc_read@10"]) == (1.0, 0.0, 1.0)


def test_nearest_rank_percentiles() -> None:
    assert nearest_rank([float(n) for n in range(1, 11)], 50) == 5.0
    assert nearest_rank([float(n) for n in range(1, 11)], 95) == 10.0
    assert nearest_rank([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert nearest_rank([1.0, 2.0, 3.0, 4.0], 95) == 4.0
    assert nearest_rank([3.0], 95) == 3.0
    assert nearest_rank([], 50) is None


def record(iid: str, **metrics: float) -> dict[str, Any]:
    return {"instance_id": iid, "metrics": {**dict.fromkeys(METRICS, 0.0), **metrics},
            "seconds": 1.0, "index_seconds": 2.0, "error": None}


def test_summary_counts_errors_as_empty_retrievals() -> None:
    ok = {**record("a"), "seconds": 3.0}
    ok["metrics"].update({"recall@1": 1.0, "irrelevant_context_ratio": 0.5, "tokens": 100.0})
    failed = {**record("b"), "metrics": dict(FAILED), "seconds": None, "index_seconds": None,
              "error": "tree: TreeError: x"}
    summary = summarise([ok, failed])
    assert (summary.instances, summary.errors) == (2, 1)
    assert summary.means["recall@1"] == 0.5
    assert summary.means["irrelevant_context_ratio"] == 0.75
    assert summary.means["tokens"] == 50.0
    assert (summary.seconds_p50, summary.seconds_p95) == (3.0, 3.0)
    assert (summary.index_seconds_median, summary.index_seconds_total) == (2.0, 2.0)


def test_summary_per_language() -> None:
    runs = [record(iid, **{"recall@1": value, "tokens": 10 * value})
            for iid, value in [("a", 1.0), ("b", 0.0), ("c", 0.5), ("d", 0.25)]]
    assert summarise_by_language(runs) == {}  # no language: no per-language summary
    labelled = [{**r, "language": language}
                for r, language in zip(runs, ["Rust", "Go", "Rust", None], strict=True)]
    by_language = summarise_by_language(labelled)
    assert list(by_language) == ["(none)", "Go", "Rust"]  # by name; unlabelled as "(none)"
    assert {k: (s.instances, s.means["recall@1"], s.means["tokens"])
            for k, s in by_language.items()} == {
        "(none)": (1, 0.25, 2.5), "Go": (1, 0.0, 0.0), "Rust": (2, 0.75, 7.5),
    }
    assert by_language["Rust"] == summarise(labelled[0::2])


def test_sign_test_exact() -> None:
    assert sign_test(0, 0) == 1.0  # nothing moved
    assert sign_test(2, 0) == 0.5  # 2 x 1/4
    assert sign_test(6, 0) == 0.03125  # 2 x 1/64
    assert sign_test(5, 1) == 0.21875  # 2 x (1 + 6)/64
    assert sign_test(1, 5) == sign_test(5, 1)
    assert sign_test(3, 3) == 1.0  # 2 x 42/64 capped at 1


def test_delta_interval_is_paired() -> None:
    before = [record(iid, line_recall=v) for iid, v in [("a", 0.0), ("b", 0.5), ("c", 1.0)]]
    after = [record(iid, line_recall=v) for iid, v in [("a", 0.5), ("b", 0.5), ("c", 1.0)]]
    low, high = delta_interval(pair(before, after), "line_recall")
    # Changes 0.5, 0, 0: mean 1/6, standard error sqrt((1/12) / 3) = 1/6.
    assert (round(low, 6), round(high, 6)) == (round((1 - 1.959964) / 6, 6),
                                               round((1 + 1.959964) / 6, 6))
    same = delta_interval(pair(before, before), "line_recall")
    assert same == (0.0, 0.0)
    assert delta_interval(pair(before[:1], after[:1]), "line_recall") == (0.5, 0.5)


BASE = {"recall@1": 0.5, "recall@3": 0.6, "recall@5": 0.7, "mrr": 0.55,
        "required_file_recall": 0.8, "required_symbol_recall": 0.6,
        "irrelevant_context_ratio": 0.9, "tokens": 3000.0}


def decide(current: dict[str, float], candidate: dict[str, float],
           **guards: tuple[Any, Any]) -> tuple[bool, str, dict[str, str]]:
    a, b = record("x"), record("x")
    a["metrics"].update(current)
    b["metrics"].update(candidate)
    for key, (x, y) in guards.items():
        a[key], b[key] = x, y
    decision = ab_decision(pair([a], [b]))
    return decision.win, decision.reason, {r.metric: r.outcome for r in decision.rows}


def test_ab_win_needs_one_strict_improvement_and_no_regression() -> None:
    win, reason, outcomes = decide(BASE, {**BASE, "mrr": 0.6})
    assert win and reason == f"mrr improve(s); nothing regresses or rises; {E2E_NOT_RUN}"
    assert outcomes["recall@1"] == "unchanged" and outcomes["mrr"] == "improves"
    assert outcomes["resolve_rate"] == outcomes["cost"] == "not measured"


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ({**BASE}, "no retrieval metric strictly improves"),
        ({**BASE, "mrr": 0.6, "recall@5": 0.69}, "recall@5 regresses"),
        ({**BASE, "mrr": 0.6, "tokens": 3001.0}, "tokens rises"),
        ({**BASE, "mrr": 0.6, "irrelevant_context_ratio": 0.91}, "irrelevant_context_ratio rises"),
    ],
)
def test_ab_lose(candidate: dict[str, float], reason: str) -> None:
    win, why, _ = decide(BASE, candidate)
    # Without the end-to-end reports a decision says that half was not run.
    assert not win and why == f"{reason}; {E2E_NOT_RUN}"


def test_ab_end_to_end_guards_when_measured() -> None:
    better = {**BASE, "mrr": 0.6}
    win, _, outcomes = decide(BASE, better, resolved=(True, True), cost=(1.0, 1.5),
                              e2e_tokens=(100, 150))
    assert win and outcomes["resolve_rate"] == "holds" and outcomes["cost"] == "within bound"
    win, reason, _ = decide(BASE, better, resolved=(True, False))
    assert not win and reason == f"resolve_rate regresses; {E2E_NOT_RUN}"
    win, reason, _ = decide(BASE, better, resolved=(True, True), cost=(1.0, 1.51),
                            e2e_tokens=(100, 150))
    assert not win and reason == "cost over bound"


def test_ablation_noise() -> None:
    assert not beyond_noise(0.5, 0.525) and beyond_noise(0.5, 0.53)
    assert not beyond_noise(0.0, 0.0) and beyond_noise(0.0, 0.01)
    assert not beyond_noise(1000.0, 950.0) and beyond_noise(1000.0, 1051.0)
    full = summarise([record("x", mrr=0.5, tokens=1000.0)])
    assert ablation_verdict(full, summarise([record("x", mrr=0.51, tokens=1040.0)])) == (
        "delete", []
    )
    assert ablation_verdict(full, summarise([record("x", mrr=0.4, tokens=1000.0)])) == (
        "keep", ["mrr"]
    )
