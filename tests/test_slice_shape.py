"""Assembly by value (issue 22): the "signatures" slice first, then whole bodies
of the leading functions (of a type: its own lines, or its span when small)
whose score is near the best, each only when it fits beside everything
planned, so the slice names the same places and shows more of the lines to
edit; the plan never hands assemble more than fits. Each rule is read without
the lines the slice adds last beside its runs (``blank_line_ends``,
``first_run_context``), which have their own tests at the end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import SHOP, make_git_repo

from ctx04_core.bench.systems import run_ctx04
from ctx04_core.output import retrieval_json
from ctx04_core.pipeline import retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings, SettingsError
from ctx04_core.stages.assemble import assemble
from ctx04_core.stages.prune import prune
from ctx04_core.stages.query import build_query
from ctx04_core.types import Candidate, ContextSlice, Excerpt, RankedCandidate

TASK = (
    "Cart.total is wrong with a coupon: the rate of the coupon code is applied to the "
    "amount, then round_money."
)


def alone(**fields: Any) -> Settings:
    """The value slice without the lines it adds last (short functions' bodies, the
    leading file's imports, the lines beside its runs; tested apart)."""
    return Settings(slice_shape="value", blank_line_ends=False, first_run_context=0,
                    leading_imports_max=0, short_function_lines=0).with_overrides(**fields)


@pytest.fixture
def shop(tmp_path: Path, indexed: Callable[..., Repo]) -> Repo:
    return indexed(make_git_repo(tmp_path / "shop", SHOP))


def ranked(repo: Repo, *order: tuple[str, float]) -> tuple[RankedCandidate, ...]:
    """(qualname, fused score) pairs as ranks 1..n."""
    nodes = {
        n.qualname: n for path in ("shop/cart.py", "shop/pricing.py")
        for n in repo.index.file_nodes(path)
    }
    return tuple(
        RankedCandidate(Candidate(nodes[q].span, nodes[q].kind, q, ("test",)), rank, score)
        for rank, (q, score) in enumerate(order, start=1)
    )


def pruned(
    repo: Repo, order: tuple[RankedCandidate, ...], settings: Settings,
    reserve: tuple[RankedCandidate, ...] = (),
) -> list[Excerpt]:
    """The prune stage's excerpts of ``order`` (and its ``reserve``) for TASK."""
    query = build_query(TASK, names=repo.index.names(), settings=settings)
    return prune(query=query, ranked=order, reserve=reserve, repo=repo, settings=settings)


def sliced(
    repo: Repo, order: tuple[RankedCandidate, ...], budget: int, **overrides: object
) -> ContextSlice:
    settings = alone(budget_tokens=budget).with_overrides(**overrides)
    excerpts = pruned(repo, order, settings)
    return assemble(excerpts=tuple(excerpts), diagnostics=(), repo=repo, settings=settings)


def shown(context: ContextSlice) -> list[tuple[str | None, str, list[int], bool]]:
    return [
        (e.excerpt.ranked.candidate.qualname, e.excerpt.shown_as,
         [n for n, _ in e.excerpt.lines], e.included)
        for e in context.entries
    ]


def test_the_leader_whole_the_next_pruned_the_last_as_its_signature(shop: Repo) -> None:
    # total leads (whole, as in the "signatures" shape); cart's module lines
    # have no signature: its best line (the docstring) and, a leader, the
    # two lines after it; round_money scores under value_score_share (0.3)
    # of the best: its signature.
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.cart", 5.0),
        ("shop.pricing.round_money", 2.0),
    )
    context = sliced(shop, order, 4000)
    assert shown(context) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.cart", "pruned", [1, 2, 3], True),
        ("shop.pricing.round_money", "signature", [12], True),
    ]
    assert context.tokens == 185


def test_a_short_function_is_whole_where_it_would_be_its_signature(shop: Repo) -> None:
    # round_money scores under value_score_share: its signature (line 12). Its
    # three lines are within short_function_lines (5): whole when the two
    # lines more fit (214 tokens); under a cap of 2 lines, or in a budget of
    # 200 (the slice with its signature is 185), its signature. Where the
    # learned order is sure of total and finds round_money improbable (p
    # 0.05), whole all the same.
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.cart", 5.0),
        ("shop.pricing.round_money", 2.0),
    )
    learned = tuple(
        replace(r, model_score=z, log_odds=z) for r, z in zip(order, (1.0, -1.0, -3.0), strict=True)
    )
    whole = ("shop.pricing.round_money", "whole", [12, 13, 14], True)
    signature = ("shop.pricing.round_money", "signature", [12], True)
    roomy = sliced(shop, order, 4000, short_function_lines=5)
    assert shown(roomy)[2] == whole
    assert roomy.tokens == 214
    assert shown(sliced(shop, learned, 4000, short_function_lines=5))[2] == whole
    assert shown(sliced(shop, order, 4000, short_function_lines=2))[2] == signature
    tight = sliced(shop, order, 200, short_function_lines=5)
    assert shown(tight) == [("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
                            ("shop.cart", "pruned", [1, 2, 3], True), signature]
    assert tight.tokens == 185


def test_a_leader_cut_to_its_best_lines_shows_their_neighbours(shop: Repo) -> None:
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.cart", 5.0),
        ("shop.pricing.round_money", 2.0),
    )

    def lines(**overrides: float) -> list[tuple[str, list[int]]]:
        settings = alone().with_overrides(**overrides)
        return [(e.shown_as, [n for n, _ in e.lines]) for e in pruned(shop, order, settings)]

    # cart's best line is its docstring (1): with two lines either side, 1-3;
    # round_money, a signature, never grows.
    assert lines() == [("whole", [41, 42, 43, 44, 45, 46]), ("pruned", [1, 2, 3]),
                       ("signature", [12])]
    # Its import of round_money (7) scores under half its best line, over a
    # tenth: at 0.1 it comes with its neighbours 5-9.
    assert lines(leader_line_ratio=0.1)[1] == ("pruned", [1, 2, 3, 5, 6, 7, 8, 9])
    # No context, or cart (rank 2) outside leader_ranks: its best line alone.
    for off in ({"leader_line_context": 0}, {"leader_ranks": 1}, {"leader_ranks": 0}):
        assert lines(**off)[1] == ("pruned", [1])


def test_bodies_near_the_best_score_are_whole_while_they_fit(shop: Repo) -> None:
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart.add", 5.0),
        ("shop.pricing.round_money", 2.0), ("shop.pricing.apply_discount", 4.0),
    )
    # With room: add (0.5 of the best) and apply_discount (0.4) whole,
    # round_money (0.2) its signature.
    assert [(q, how) for q, how, _, _ in shown(sliced(shop, order, 4000))] == [
        ("shop.cart.Cart.total", "whole"), ("shop.cart.Cart.add", "whole"),
        ("shop.pricing.round_money", "signature"), ("shop.pricing.apply_discount", "whole"),
    ]
    # 300 tokens: add's body still fits beside the planned signatures,
    # apply_discount's does not; every candidate stays shown.
    context = sliced(shop, order, 300)
    assert shown(context) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32], True),
        ("shop.pricing.round_money", "signature", [12], True),
        ("shop.pricing.apply_discount", "signature", [6], True),
    ]
    assert context.tokens == 282
    # Past value_ranks (outside the leading file) a body stays a signature
    # whatever its score.
    limited = alone(value_ranks=3, value_files=1)
    shapes = [e.shown_as for e in pruned(shop, order, limited)]
    assert shapes == ["whole", "whole", "signature", "signature"]


def test_a_leader_too_large_for_the_budget_falls_back_to_its_best_lines(shop: Repo) -> None:
    order = ranked(shop, ("shop.cart.Cart.add", 1.0), ("shop.cart.Cart.total", 0.1))
    # add's whole body and total's signature fit 145 tokens; under 125 the
    # body does not fit, and add shows its signature and best line.
    assert shown(sliced(shop, order, 145)) == [
        ("shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32], True),
        ("shop.cart.Cart.total", "signature", [41], True),
    ]
    for budget in (120, 100, 90):
        context = sliced(shop, order, budget)
        assert shown(context)[0] == ("shop.cart.Cart.add", "pruned", [28, 29], True)
        assert context.tokens <= budget


def test_a_line_the_task_points_at_is_shown_with_the_best_lines(shop: Repo) -> None:
    # A stack frame's line in add (31, whose words the task does not use) joins
    # its best lines when the body does not fit; a pointed line outside the
    # candidate's own lines (total's 43) shows nothing of it.
    add, total = ranked(shop, ("shop.cart.Cart.add", 1.0), ("shop.cart.Cart.total", 0.1))
    add = replace(add, candidate=replace(add.candidate, pointed_lines=(31, 43)))
    context = sliced(shop, (add, total), 120)
    assert shown(context)[0] == ("shop.cart.Cart.add", "pruned", [28, 29, 31], True)
    assert context.tokens == 103  # within the budget of 120


def test_headings_that_run_out_still_leave_the_planned_bodies_whole(shop: Repo) -> None:
    # 160 heading bytes hold two headings (total's 73, add's about 70): the
    # plan stops at round_money, but add's body costs tokens, not headings,
    # and is whole; what the plan could not hold is assemble's to cut.
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart.add", 5.0),
        ("shop.pricing.round_money", 2.0), ("shop.pricing.apply_discount", 4.0),
    )
    settings = alone(max_reference_bytes=160)
    excerpts = pruned(shop, order, settings)
    context = assemble(excerpts=tuple(excerpts), diagnostics=(), repo=shop, settings=settings)
    assert shown(context) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32], True),
        ("shop.pricing.round_money", "signature", [12], False),
        ("shop.pricing.apply_discount", "signature", [6], False),
    ]
    assert context.tokens == 213


def test_a_body_past_the_length_cap_is_never_whole(shop: Repo) -> None:
    order = ranked(shop, ("shop.cart.Cart.add", 10.0), ("shop.cart.Cart.total", 9.0))
    for cap, total_shown in ((None, "whole"), (6, "whole"), (5, "pruned")):
        excerpts = pruned(shop, order, alone(whole_body_max_lines=cap))
        # total has six own lines; the leader is whole as in "signatures".
        assert [e.shown_as for e in excerpts] == ["whole", total_shown]
    # Past leader_ranks, a body past the cap is its signature.
    excerpts = pruned(
        shop, order, alone(whole_body_max_lines=5, leader_ranks=1)
    )
    assert [e.shown_as for e in excerpts] == ["whole", "signature"]


def test_a_leader_too_long_for_its_body_shows_its_best_lines(shop: Repo) -> None:
    order = ranked(shop, ("shop.cart.Cart.add", 10.0), ("shop.cart.Cart.total", 9.0))
    # total (rank 2, 0.9 of the best score) is wanted whole, a slice of 206
    # tokens that a budget of 220 holds. At 210 the body does not fit, nor
    # its best line (46) with two lines either side: its signature and best
    # line do.
    context = sliced(shop, order, 210)
    assert shown(context) == [
        ("shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32], True),
        ("shop.cart.Cart.total", "pruned", [41, 46], True),
    ]
    assert context.tokens == 161
    # Past the length cap its neighbours fit too: the whole of a six-line body
    # shown as the lines near its best.
    context = sliced(shop, order, 4000, whole_body_max_lines=5)
    assert shown(context)[1] == (
        "shop.cart.Cart.total", "pruned", [41, 42, 43, 44, 45, 46], True
    )
    # Past leader_ranks it stays a signature.
    context = sliced(shop, order, 210, leader_ranks=1)
    assert shown(context)[1] == ("shop.cart.Cart.total", "signature", [41], True)


def test_the_json_says_how_each_candidate_was_shown(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", SHOP)
    data = retrieval_json(retrieve(TASK, root, settings=alone()))
    for candidate in data["candidates"]:
        assert candidate["shown_as"] == (
            candidate["shown_as"] if candidate["included"] else None
        )
        assert candidate["included"] == (candidate["shown_as"] in ("whole", "pruned", "signature"))
    assert data["candidates"][0]["shown_as"] == "whole"


def test_an_unknown_slice_shape_is_refused() -> None:
    with pytest.raises(SettingsError, match="slice_shape is one of value, signatures"):
        Settings(slice_shape="everything")


def test_leader_settings_out_of_range_are_refused() -> None:
    with pytest.raises(SettingsError, match=r"leader_line_ratio .* in \(0, 1\], not 0.0"):
        Settings(leader_line_ratio=0.0)
    for negative in ("leader_ranks", "leader_line_context", "type_span_max_lines",
                     "first_run_context", "leading_imports_max", "short_function_lines"):
        with pytest.raises(SettingsError, match="leading_imports_max and short_function_lines "
                                                "are counts, 0 or more"):
            Settings().with_overrides(**{negative: -1})


def test_a_small_leading_class_is_shown_whole_its_methods_not_twice(shop: Repo) -> None:
    # Cart (lines 20-46, 27 lines) ranks first and is at most
    # type_span_max_lines long: its whole span, methods too. total, inside
    # it, is shown there: it keeps its signature line rather than a second
    # copy of its body; round_money scores under value_score_share: its
    # signature.
    order = ranked(
        shop, ("shop.cart.Cart", 10.0), ("shop.cart.Cart.total", 5.0),
        ("shop.pricing.round_money", 2.0),
    )
    context = sliced(shop, order, 4000, type_span_max_lines=27)
    assert shown(context) == [
        ("shop.cart.Cart", "whole", list(range(20, 47)), True),
        ("shop.cart.Cart.total", "signature", [41], True),
        ("shop.pricing.round_money", "signature", [12], True),
    ]
    assert context.tokens == 363
    # One line longer than the cap: its own lines (header, docstring, the
    # blank lines between its methods, where a new one would go), not its
    # methods, which are candidates of their own (total, the leading
    # function, whole).
    context = sliced(shop, order, 4000, type_span_max_lines=26)
    assert shown(context) == [
        ("shop.cart.Cart", "whole", [20, 21, 22, 27, 33, 36, 40], True),
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.pricing.round_money", "signature", [12], True),
    ]
    assert context.tokens == 204
    # Room for the signatures but not Cart's lines: a leader the score share
    # wants whole, too long for what is left, its best line (the docstring)
    # and its neighbours.
    for cap in (26, 27):
        context = sliced(shop, order, 200, type_span_max_lines=cap)
        assert shown(context)[0] == ("shop.cart.Cart", "pruned", [20, 21, 22], True)
        assert context.tokens == 189


def test_a_class_ranked_below_the_first_keeps_its_signature(shop: Repo) -> None:
    # Ranked second to fifth, a type's own lines were 98 % irrelevant on the
    # training tasks: Cart, second at half the best score, longer than
    # type_span_max_lines, stays a signature.
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart", 5.0),
        ("shop.pricing.round_money", 2.0),
    )
    assert shown(sliced(shop, order, 4000, type_span_max_lines=26)) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.cart.Cart", "signature", [20], True),
        ("shop.pricing.round_money", "signature", [12], True),
    ]
    # Within the cap (27 lines, among the first leader_ranks): its span, less
    # total's lines, shown above it, which keeps its body.
    assert shown(sliced(shop, order, 4000)) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.cart.Cart", "whole", list(range(20, 41)), True),
        ("shop.pricing.round_money", "signature", [12], True),
    ]
    # Past leader_ranks: its signature.
    assert shown(sliced(shop, order, 4000, leader_ranks=1))[1] == (
        "shop.cart.Cart", "signature", [20], True
    )


def test_past_value_ranks_a_body_in_the_leading_file_is_whole(shop: Repo) -> None:
    # value_ranks 1: only the leader's rank counts, but Cart.add shares
    # total's file and scores half the best: whole; apply_discount scores
    # 0.4 of the best in another file: its signature, as round_money (0.2).
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.pricing.apply_discount", 4.0),
        ("shop.pricing.round_money", 2.0), ("shop.cart.Cart.add", 5.0),
    )
    def shapes(settings: Settings) -> list[tuple[str | None, str, list[int]]]:
        return [(e.ranked.candidate.qualname, e.shown_as, [n for n, _ in e.lines])
                for e in pruned(shop, order, settings)]

    assert shapes(alone(value_ranks=1, value_files=1)) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46]),
        ("shop.pricing.apply_discount", "signature", [6]),
        ("shop.pricing.round_money", "signature", [12]),
        ("shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32]),
    ]
    # By default the files of the first three candidates lead: pricing.py
    # (apply_discount ranks second) too; round_money still scores under the
    # share.
    assert shapes(alone(value_ranks=1)) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46]),
        ("shop.pricing.apply_discount", "whole", [6, 7, 8, 9]),
        ("shop.pricing.round_money", "signature", [12]),
        ("shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32]),
    ]


def test_a_slice_in_doubt_shows_the_probable_bodies_whole(shop: Repo) -> None:
    # round_money scores 0.2 of the best (under value_score_share): its
    # signature, unless the learned order doubts its leaders (the most
    # probable under doubt_probability, 0.3, or under sure_margin, 2, times
    # the next) and gives it at least doubt_floor (0.03).
    def order(*log_odds: float | None) -> tuple[RankedCandidate, ...]:
        plain = ranked(
            shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart.add", 5.0),
            ("shop.pricing.apply_discount", 4.0), ("shop.pricing.round_money", 2.0),
        )
        return tuple(
            replace(r, model_score=z, log_odds=z) for r, z in zip(plain, log_odds, strict=True)
        )

    def round_money(candidates: tuple[RankedCandidate, ...], **overrides: object) -> str:
        settings = alone().with_overrides(**overrides)
        return pruned(shop, candidates, settings)[3].shown_as

    # Leaders at p 0.27, 0.12, 0.05; round_money at p 0.047.
    doubtful = order(-1.0, -2.0, -3.0, -3.0)
    assert round_money(doubtful) == "whole"
    assert [(n, text) for n, text in pruned(shop, doubtful, Settings())[3].lines] == [
        (12, "def round_money(amount: float) -> float:"),
        (13, '    """Round to whole cents, half up."""'),
        (14, "    return int(amount * 100 + 0.5) / 100"),
    ]
    # A leader at p 0.5 is trusted; round_money at p 0.018 is under the
    # floor; doubt off, or no model scores (the weighted fusion): its signature.
    assert round_money(order(0.0, -2.0, -3.0, -3.0)) == "signature"
    assert round_money(order(-1.0, -2.0, -3.0, -4.0)) == "signature"
    assert round_money(doubtful, doubt_probability=0.0) == "signature"
    assert round_money(order(None, None, None, None)) == "signature"
    # A leader at p 0.40: trusted at doubt_probability 0.3, in doubt at 0.45.
    assert round_money(order(-0.4, -2.0, -3.0, -3.0)) == "signature"
    assert round_money(order(-0.4, -2.0, -3.0, -3.0), doubt_probability=0.45) == "whole"
    # Leaders at p 0.40 and 0.35: probable, but alike: in doubt, unless the
    # probability alone decides (a margin of 1).
    assert round_money(order(-0.4, -0.6, -3.0, -3.0)) == "whole"
    assert round_money(order(-0.4, -0.6, -3.0, -3.0), sure_margin=1.0) == "signature"
    # Log-odds no logistic model gives still read as probabilities (0 and 1),
    # never an overflow.
    assert round_money(order(-1000.0, -1000.0, -1000.0, -3.0)) == "whole"
    assert round_money(order(-1000.0, -1000.0, -1000.0, -1000.0)) == "signature"
    assert round_money(order(1000.0, -2.0, -3.0, -3.0)) == "signature"
    # The most probable candidate need not be first (a rank fusion moves it).
    assert round_money(order(-2.0, -1.5, 0.0, -3.0)) == "signature"
    # A third party's signal added to the model score moves the order, not the
    # probability the slice reads: the model's own log-odds keep it in doubt.
    lifted = tuple(replace(r, model_score=(r.model_score or 0.0) + 2.0) for r in doubtful)
    assert round_money(lifted) == "whole"


def test_last_in_doubt_a_body_the_task_matches_is_whole_past_the_floor(shop: Repo) -> None:
    # round_money scores 0.2 of the best (under value_score_share): its
    # signature. At p 0.027 it is under doubt_floor (0.03) too; but in doubt,
    # once every other rule has had the room, a function a recall source
    # found a task's term in (TASK names round_money: its hit line 14) is
    # whole when the learned order gives it at least doubt_hit_floor (0.02).
    def order(leader: float, money: float, hits: tuple[int, ...]) -> tuple[RankedCandidate, ...]:
        plain = ranked(
            shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart.add", 5.0),
            ("shop.pricing.apply_discount", 4.0), ("shop.pricing.round_money", 2.0),
        )
        *first, last = plain
        matched = replace(last, candidate=replace(last.candidate, hit_lines=hits))
        return tuple(
            replace(r, model_score=z, log_odds=z)
            for r, z in zip((*first, matched), (leader, -2.0, -3.0, money), strict=True)
        )

    def round_money(candidates: tuple[RankedCandidate, ...], **overrides: object) -> list[int]:
        excerpt = pruned(shop, candidates, alone(doubt_head=False).with_overrides(**overrides))[3]
        assert excerpt.ranked.candidate.qualname == "shop.pricing.round_money"
        return [n for n, _ in excerpt.lines]

    # Leaders at p 0.27, 0.12, 0.05 (in doubt); round_money at p 0.027, hit.
    doubtful = order(-1.0, -3.6, (14,))
    assert round_money(doubtful) == [12, 13, 14]
    # No hit line, p 0.018 (under the floor), the rule off, a trusted leader
    # (p 0.5), or a budget with no room for its two more lines: its signature.
    assert round_money(order(-1.0, -3.6, ())) == [12]
    assert round_money(order(-1.0, -4.0, (14,))) == [12]
    assert round_money(doubtful, doubt_hit_floor=0.0) == [12]
    assert round_money(order(0.0, -3.6, (14,))) == [12]
    signature_slice = sliced(shop, order(-1.0, -3.6, ()), 4000, doubt_head=False)
    assert round_money(doubtful, budget_tokens=signature_slice.tokens) == [12]


def test_a_sure_slice_shows_an_improbable_function_as_its_signature(shop: Repo) -> None:
    # apply_discount scores 0.4 of the best (over value_score_share, rank 3):
    # whole by the score (Cart.add, sharing no word with TASK, is left out
    # unless in doubt); but where the learned order is sure of a leader (p
    # of at least doubt_probability) it shows only its signature when the
    # model gives it less than sure_floor (0.1).
    def order(leader: float, discount: float) -> tuple[RankedCandidate, ...]:
        plain = ranked(
            shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart.add", 5.0),
            ("shop.pricing.apply_discount", 4.0),
        )
        log_odds = (leader, -2.0, discount)
        return tuple(
            replace(r, model_score=z, log_odds=z) for r, z in zip(plain, log_odds, strict=True)
        )

    def discount(candidates: tuple[RankedCandidate, ...], **overrides: object) -> Excerpt:
        settings = alone(doubt_head=False).with_overrides(**overrides)
        excerpts = pruned(shop, candidates, settings)
        return next(e for e in excerpts if e.ranked.candidate.qualname.endswith("apply_discount"))

    # A leader at p 0.5, apply_discount at p 0.047: its signature alone.
    sure = order(0.0, -3.0)
    assert discount(sure).shown_as == "signature"
    assert [n for n, _ in discount(sure).lines] == [6]
    # At p 0.12 (over the floor), with the floor at 0, in doubt (the leader at
    # p 0.27), or without a model score (the weighted fusion): its body.
    whole = [6, 7, 8, 9]
    for candidates, overrides in (
        (order(0.0, -2.0), {}), (sure, {"sure_floor": 0.0}), (order(-1.0, -3.0), {}),
    ):
        assert [n for n, _ in discount(candidates, **overrides).lines] == whole
    weighted = tuple(replace(r, model_score=None, log_odds=None) for r in sure)
    assert discount(weighted).shown_as == "whole"
    # The leader itself is what the slice is sure of: whole.
    assert pruned(shop, sure, alone())[0].shown_as == "whole"


def test_a_slice_led_by_a_module_is_in_doubt(shop: Repo) -> None:
    # The same order, sure of its leader (p 0.5 against 0.12), but the leader
    # is shop.cart's module: the order is sure of a file, not of its lines,
    # and the slice is in doubt. apply_discount (p 0.047, over doubt_floor)
    # is whole; with doubt_module_leader off, the sure slice's signature.
    plain = ranked(
        shop, ("shop.cart", 10.0), ("shop.cart.Cart.add", 5.0),
        ("shop.pricing.apply_discount", 4.0),
    )
    led = tuple(
        replace(r, model_score=z, log_odds=z)
        for r, z in zip(plain, (0.0, -2.0, -3.0), strict=True)
    )

    def discount(**overrides: object) -> list[int]:
        settings = alone(doubt_head=False).with_overrides(**overrides)
        excerpt = pruned(shop, led, settings)[2]
        assert excerpt.ranked.candidate.qualname == "shop.pricing.apply_discount"
        return [n for n, _ in excerpt.lines]

    assert discount() == [6, 7, 8, 9]
    assert discount(doubt_module_leader=False) == [6]


def test_in_doubt_a_ranked_body_the_line_floor_refused_is_weighed_too(shop: Repo) -> None:
    # Cart.remove shares no word with TASK: the line floor leaves it out of the
    # slice, rank or no rank. In doubt, a ranked function is shown whole by its
    # probability (doubt_floor), in its rank's place, apart from lines shown.
    def order(remove: float) -> tuple[RankedCandidate, ...]:
        plain = ranked(
            shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart.remove", 5.0),
            ("shop.pricing.apply_discount", 4.0),
        )
        return tuple(replace(r, model_score=z, log_odds=z)
                     for r, z in zip(plain, (-1.0, remove, -3.0), strict=True))

    def entries(
        candidates: tuple[RankedCandidate, ...], **overrides: object
    ) -> list[tuple[int, str, str, list[int]]]:
        settings = alone(doubt_head=False).with_overrides(**overrides)
        return [
            (e.ranked.rank, e.ranked.candidate.qualname, e.shown_as, [n for n, _ in e.lines])
            for e in pruned(shop, candidates, settings)
        ]

    total = (1, "shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46])
    discount = (3, "shop.pricing.apply_discount", "whole", [6, 7, 8, 9])
    # Leaders at p 0.27, 0.12 (Cart.remove), 0.05: in doubt.
    assert entries(order(-2.0)) == [
        total, (2, "shop.cart.Cart.remove", "whole", [34, 35]), discount,
    ]
    # Under doubt_floor (p 0.018), trusted leaders (p 0.5), doubt off: left out.
    assert entries(order(-4.0)) == [total, discount]
    trusted = order(-2.0)
    trusted = (replace(trusted[0], model_score=0.0, log_odds=0.0), *trusted[1:])
    # (Trusted, apply_discount at p 0.047 is under sure_floor: its signature.)
    improbable = (3, "shop.pricing.apply_discount", "signature", [6])
    assert entries(trusted) == [total, improbable]
    assert entries(order(-2.0), doubt_probability=0.0) == [total, improbable]
    assert entries(order(-2.0), doubt_probability=0.0, sure_floor=0.0) == [total, discount]


def test_a_slice_in_doubt_shows_probable_siblings_from_past_top_k(shop: Repo) -> None:
    def scored(
        first_rank: int, *named: tuple[str, float]
    ) -> tuple[RankedCandidate, ...]:
        plain = ranked(shop, *((q, 1.0) for q, _ in named))
        return tuple(replace(r, rank=r.rank + first_rank - 1, model_score=z, log_odds=z)
                     for r, (_, z) in zip(plain, named, strict=True))

    # Leaders at p 0.27, 0.12, 0.05 (in doubt), in cart.py and pricing.py.
    doubtful = scored(1, ("shop.cart.Cart.total", -1.0), ("shop.cart.Cart.add", -2.0),
                      ("shop.pricing.apply_discount", -3.0))
    # The learned order past top_k: p 0.029, 0.0025 (under doubt_pool_floor,
    # 0.01), 0.018.
    reserve = scored(4, ("shop.cart.Cart.remove", -3.5), ("shop.cart.Cart.apply_coupon", -6.0),
                     ("shop.cart.LineItem.subtotal", -4.0))

    def siblings(
        leaders: tuple[RankedCandidate, ...], **overrides: object
    ) -> list[tuple[str, int, str, list[int]]]:
        settings = alone(doubt_head=False).with_overrides(**overrides)
        return [
            (e.ranked.candidate.qualname, e.ranked.rank, e.shown_as, [n for n, _ in e.lines])
            for e in pruned(shop, leaders, settings, reserve) if e.ranked.rank > 3
        ]

    # After the candidates, whole, in the reserve's order.
    assert siblings(doubtful) == [
        ("shop.cart.Cart.remove", 4, "whole", [34, 35]),
        ("shop.cart.LineItem.subtotal", 6, "whole", [16, 17]),
    ]
    assert siblings(doubtful, doubt_pool_floor=0.02) == [
        ("shop.cart.Cart.remove", 4, "whole", [34, 35]),
    ]
    # Trusted leaders (p 0.5), doubt off, the floor at 1: none.
    trusted = (replace(doubtful[0], model_score=0.0, log_odds=0.0), *doubtful[1:])
    assert siblings(trusted) == []
    assert siblings(doubtful, doubt_probability=0.0) == []
    assert siblings(doubtful, doubt_pool_floor=1.0) == []
    # Only in the files the slice shows: with leaders in pricing.py alone, none.
    assert siblings(doubtful[2:]) == []


def test_a_slice_in_doubt_shows_the_leading_files_head(shop: Repo) -> None:
    def scored(*named: tuple[str, float]) -> tuple[RankedCandidate, ...]:
        plain = ranked(shop, *((q, 1.0) for q, _ in named))
        return tuple(replace(r, model_score=z, log_odds=z)
                     for r, (_, z) in zip(plain, named, strict=True))

    def head(
        leaders: tuple[RankedCandidate, ...], **overrides: object
    ) -> list[tuple[str, int, str, tuple[str, ...], list[tuple[int, str]]]]:
        settings = alone().with_overrides(**overrides)
        return [
            (e.ranked.candidate.qualname or "", e.ranked.rank, e.shown_as,
             e.ranked.candidate.sources, list(e.lines))
            for e in pruned(shop, leaders, settings) if "head" in e.ranked.candidate.sources
        ]

    # Leaders at p 0.27, 0.12 (in doubt); the first in cart.py: its lines
    # before LineItem (10), the blank ones at the end left out, ranked after
    # the two candidates and an empty reserve.
    doubtful = scored(("shop.cart.Cart.total", -1.0), ("shop.pricing.apply_discount", -2.0))
    assert head(doubtful) == [("shop.cart", 3, "whole", ("head",), [
        (1, '"""Shopping cart."""'),
        (2, "from __future__ import annotations"),
        (3, ""),
        (4, "from dataclasses import dataclass"),
        (5, ""),
        (6, "from .inventory import Inventory"),
        (7, "from .pricing import apply_discount, round_money"),
    ])]
    # Led by pricing.py: its docstring and its table of coupons.
    assert [lines for *_, lines in head(tuple(reversed(doubtful)))] == [
        [(1, '"""Prices, coupons and rounding."""'), (2, ""),
         (3, 'COUPONS = {"SAVE10": 0.10, "HALF": 0.50}')],
    ]
    # Lines the slice already shows are left out: cart's module lines ranked
    # second show its docstring (1), its best line, with two lines after it.
    with_module = scored(("shop.cart.Cart.total", -1.0), ("shop.cart", -2.0))
    assert [(how, [n for n, _ in lines]) for _, _, how, _, lines in head(with_module)] == [
        ("pruned", [4, 5, 6, 7]),
    ]
    # Trusted leaders (p 0.5), doubt off, the head off: none.
    assert head((replace(doubtful[0], model_score=0.0, log_odds=0.0), doubtful[1])) == []
    assert head(doubtful, doubt_probability=0.0) == []
    assert head(doubtful, doubt_head=False) == []
    # A budget with no room left for it after the leaders: none, and the
    # slice keeps to the cap.
    settings = alone(budget_tokens=150)
    excerpts = pruned(shop, doubtful, settings)
    context = assemble(excerpts=tuple(excerpts), diagnostics=(), repo=shop, settings=settings)
    assert [e.ranked.rank for e in excerpts] == [1, 2]
    assert context.tokens <= 150


def test_a_sure_slice_shows_the_leading_files_imports_when_they_are_few(shop: Repo) -> None:
    def imports(
        leaders: tuple[RankedCandidate, ...], **overrides: object
    ) -> list[tuple[str, int, str, list[int]]]:
        settings = alone(leading_imports_max=10).with_overrides(**overrides)
        return [
            (e.ranked.candidate.qualname or "", e.ranked.rank, e.shown_as,
             [n for n, _ in e.lines])
            for e in pruned(shop, leaders, settings) if "head" in e.ranked.candidate.sources
        ]

    # Under the weighted fusion (no probability), led by cart.py: its four
    # import statements of the head (1-9), ranked after the two candidates;
    # not its docstring.
    weighted = ranked(shop, ("shop.cart.Cart.total", 1.0), ("shop.pricing.apply_discount", 0.5))
    assert imports(weighted) == [("shop.cart", 3, "pruned", [2, 4, 6, 7])]
    # Four are more than three: none. With the blank lines after each.
    assert imports(weighted, leading_imports_max=3) == []
    assert imports(weighted, leading_imports_max=0) == []
    assert imports(weighted, blank_line_ends=True) == [
        ("shop.cart", 3, "pruned", [2, 3, 4, 5, 6, 7, 8, 9]),
    ]
    # A sure learned order (p 0.73 and 0.12) the same; in doubt (0.27 and
    # 0.12) the whole head instead.
    sure = tuple(replace(r, model_score=z, log_odds=z)
                 for r, z in zip(weighted, (1.0, -2.0), strict=True))
    assert imports(sure) == [("shop.cart", 3, "pruned", [2, 4, 6, 7])]
    doubtful = (replace(sure[0], model_score=-1.0, log_odds=-1.0), sure[1])
    assert imports(doubtful) == [("shop.cart", 3, "whole", [1, 2, 3, 4, 5, 6, 7])]
    # Led by pricing.py, which imports nothing: none.
    assert imports(tuple(replace(r, rank=rank) for rank, r in
                         enumerate(reversed(weighted), start=1))) == []


def test_siblings_are_references_ranked_after_the_candidates(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", SHOP)

    def shown(**overrides: object) -> tuple[list[tuple[int, str]], list[tuple[int, str, int, int]]]:
        # Always in doubt (every p < 1); two candidates, the rest of the
        # learned order in reserve.
        settings = alone(fusion="learned", top_k=2, doubt_probability=1.0).with_overrides(
            **overrides
        )
        data = retrieval_json(retrieve(TASK, root, settings=settings))
        return ([(c["rank"], c["qualname"]) for c in data["candidates"]],
                [(r["rank"], r["path"], r["start_line"], r["end_line"])
                 for r in data["references"]])

    candidates = [(1, "shop.cart.Cart.total"), (2, "shop.pricing.round_money")]
    # Every function of cart.py and pricing.py in the reserve, whole, by its
    # learned rank; cart.py's head ranked after the whole reserve (16); then
    # the signatures of what the shown lines call (inventory.py's, LineItem's
    # header), numbered after them.
    head = (19, "shop/cart.py", 1, 7)
    assert shown(doubt_pool_floor=0.0) == (candidates, [
        (1, "shop/cart.py", 41, 46), (2, "shop/pricing.py", 12, 14),
        (3, "shop/cart.py", 37, 39), (5, "shop/pricing.py", 6, 9), (7, "shop/cart.py", 16, 17),
        (8, "shop/cart.py", 28, 32), (9, "shop/cart.py", 23, 26), (12, "shop/cart.py", 34, 35),
        head, (20, "shop/inventory.py", 13, 13), (21, "shop/inventory.py", 16, 16),
        (22, "shop/cart.py", 10, 11),
    ])
    # Without them, the head and the signatures follow the candidates.
    assert shown(doubt_pool_floor=1.0) == (candidates, [
        (1, "shop/cart.py", 41, 46), (2, "shop/pricing.py", 12, 14), head,
        (20, "shop/cart.py", 16, 16), (21, "shop/pricing.py", 6, 6),
    ])
    # Without the head either, the signatures follow the candidates at once.
    assert shown(doubt_pool_floor=1.0, doubt_head=False) == (candidates, [
        (1, "shop/cart.py", 41, 46), (2, "shop/pricing.py", 12, 14),
        (3, "shop/cart.py", 16, 16), (4, "shop/pricing.py", 6, 6),
    ])


def test_eval_records_say_what_each_entry_past_the_candidates_is(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", SHOP)
    settings = alone(fusion="learned", top_k=2, doubt_probability=1.0, doubt_pool_floor=0.0)
    answer = run_ctx04(TASK, root, settings, plugin_manager())
    # As in the references above: the candidates by rank; the reserve's
    # functions, cart.py's head and the called signatures by what they are.
    assert [(s.path, s.rank, s.extra, s.lines[0], s.lines[-1]) for s in answer.shown] == [
        ("shop/cart.py", 1, None, 41, 46), ("shop/pricing.py", 2, None, 12, 14),
        ("shop/cart.py", None, "reserve", 37, 39), ("shop/pricing.py", None, "reserve", 6, 9),
        ("shop/cart.py", None, "reserve", 16, 17), ("shop/cart.py", None, "reserve", 28, 32),
        ("shop/cart.py", None, "reserve", 23, 26), ("shop/cart.py", None, "reserve", 34, 35),
        ("shop/cart.py", None, "head", 1, 7), ("shop/inventory.py", None, "called", 13, 13),
        ("shop/inventory.py", None, "called", 16, 16), ("shop/cart.py", None, "called", 10, 11),
    ]


def test_doubt_settings_out_of_range_are_refused() -> None:
    with pytest.raises(SettingsError, match=r"doubt_probability, doubt_floor, doubt_pool_floor, "
                       r"sure_floor, run_context_floor and doubt_hit_floor are probabilities, "
                       r"in \[0, 1\], not 1.5, 0.03, 0.01, 0.1, 0.1, 0.02"):
        Settings(doubt_probability=1.5)
    with pytest.raises(SettingsError, match=r"not 0.3, 0.03, -0.1, 0.1, 0.1, 0.02"):
        Settings(doubt_pool_floor=-0.1)
    with pytest.raises(SettingsError, match=r"not 0.3, 0.03, 0.01, 2.0, 0.1, 0.02"):
        Settings(sure_floor=2.0)
    with pytest.raises(SettingsError, match=r"not 0.3, 0.03, 0.01, 0.1, -0.5, 0.02"):
        Settings(run_context_floor=-0.5)
    with pytest.raises(SettingsError, match=r"not 0.3, 0.03, 0.01, 0.1, 0.1, 1.2"):
        Settings(doubt_hit_floor=1.2)
    for margin in (0.5, float("nan")):
        with pytest.raises(SettingsError, match=r"sure_margin is how many times the next "
                           r"candidate's probability the first's must be, 1 or more, not "):
            Settings(sure_margin=margin)



def test_blank_lines_after_each_run_are_shown_when_they_fit(shop: Repo) -> None:
    # The same order as above, with blank_line_ends (the default): add's body
    # and apply_discount's show the blank lines after them, where a function
    # added after them would go; total ends the file, round_money's signature
    # is followed by its body. "\n\n" is one token: the slice costs the same.
    order = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.cart.Cart.add", 5.0),
        ("shop.pricing.round_money", 2.0), ("shop.pricing.apply_discount", 4.0),
    )
    context = sliced(shop, order, 4000, blank_line_ends=True)
    assert shown(context) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32, 33], True),
        ("shop.pricing.round_money", "signature", [12], True),
        ("shop.pricing.apply_discount", "whole", [6, 7, 8, 9, 10, 11], True),
    ]
    assert context.tokens == sliced(shop, order, 4000, blank_line_ends=False).tokens == 323
    # A blank line is a quoted line: 16 quoted lines hold the bodies, none of
    # the blank lines; 17 hold add's, not apply_discount's two.
    for limit, add, discount in (
        (16, [28, 29, 30, 31, 32], [6, 7, 8, 9]), (17, [28, 29, 30, 31, 32, 33], [6, 7, 8, 9]),
    ):
        lines = [n for _, _, n, _ in shown(
            sliced(shop, order, 4000, blank_line_ends=True, max_quoted_lines=limit)
        )]
        assert lines == [[41, 42, 43, 44, 45, 46], add, [12], discount]


GAPS = '''"""Tidy, spaced and loud values."""


def tidy(value):
    return value.strip()




def spaced(value):
    return " ".join(value)


def loud(value):
    """The value, loud."""
    loud_value = value.upper()
    if not loud_value:
        return loud_value
    loud_value = loud_value + "!"
    if loud_value.endswith("!!"):
        loud_value = loud_value[:-1]
    tidy(loud_value)
    spaced(loud_value)
    return loud_value
'''


def test_blank_lines_before_a_body_once_and_never_a_long_run(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    repo = indexed(make_git_repo(tmp_path / "gaps", {"gaps.py": GAPS}))
    nodes = {n.qualname: n for n in repo.index.file_nodes("gaps.py")}
    order = tuple(
        RankedCandidate(Candidate(nodes[q].span, nodes[q].kind, q, ("test",)), rank, score)
        for rank, (q, score) in enumerate(
            (("gaps.loud", 10.0), ("gaps.spaced", 9.0), ("gaps.tidy", 8.0)), start=1
        )
    )
    settings = Settings(slice_shape="value")
    query = build_query("loud, spaced and tidy values", names=repo.index.names(),
                        settings=settings)
    excerpts = prune(query=query, ranked=order, reserve=(), repo=repo, settings=settings)
    # loud, a body of 11 lines, shows the two blank lines before it; spaced's
    # blank lines after it are loud's, shown once; the four after tidy are a
    # layout, not a separator, and none is shown.
    assert [(e.ranked.candidate.qualname, e.shown_as, [n for n, _ in e.lines])
            for e in excerpts] == [
        ("gaps.loud", "whole", list(range(12, 25))),
        ("gaps.spaced", "whole", [10, 11]),
        ("gaps.tidy", "whole", [4, 5]),
    ]




def test_the_first_candidates_runs_show_three_lines_either_side_when_they_fit(
    shop: Repo,
) -> None:
    # Cart ranks first, shown as its own lines (type_span_max_lines 0): its
    # header and docstring (20-22) and the blank lines between its members,
    # five runs. With room, each run shows three lines either side; where all
    # of them do not fit, the runs take theirs in file order while they fit;
    # total, second, shows no more than its body.
    order = ranked(shop, ("shop.cart.Cart", 1.0), ("shop.cart.Cart.total", 0.5))
    total = ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True)

    def cart(budget: int, reach: int) -> list[int]:
        context = sliced(shop, order, budget, blank_line_ends=True, first_run_context=reach,
                         type_span_max_lines=0)
        assert shown(context)[1] == total
        assert context.tokens <= budget
        return shown(context)[0][2]

    assert cart(4000, 0) == cart(210, 3) == [20, 21, 22, 27, 33, 36, 40]
    assert cart(220, 3) == [17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 33, 36, 40]
    assert cart(270, 3) == [*range(17, 31), 33, 36, 40]
    assert cart(4000, 3) == list(range(17, 41))


def test_a_probable_later_candidate_shows_three_lines_either_side_too(shop: Repo) -> None:
    # The learned order is sure of total (p 0.73 against 0.27): apply_discount,
    # second, shows three lines either side of its body when its probability
    # reaches run_context_floor, the line after them being round_money's
    # signature; under a higher floor, or the weighted fusion (no probability),
    # its body alone. round_money (p 0.05) is improbable: its signature.
    plain = ranked(
        shop, ("shop.cart.Cart.total", 10.0), ("shop.pricing.apply_discount", 9.0),
        ("shop.pricing.round_money", 2.0),
    )
    learned = tuple(
        replace(r, model_score=z, log_odds=z) for r, z in zip(plain, (1.0, -1.0, -3.0), strict=True)
    )

    def apply_discount(order: tuple[RankedCandidate, ...], floor: float) -> list[int]:
        context = sliced(shop, order, 4000, first_run_context=3, run_context_floor=floor)
        assert shown(context)[0][2] == list(range(38, 47))
        return shown(context)[1][2]

    assert apply_discount(learned, 0.1) == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert apply_discount(learned, 0.3) == apply_discount(learned, 0.0) == [6, 7, 8, 9]
    assert apply_discount(plain, 0.1) == [6, 7, 8, 9]
