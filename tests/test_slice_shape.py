"""Assembly by value (issue 22): the budget goes to whole bodies in rank order,
then best lines, then signatures, and the plan never hands assemble more
than fits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SHOP, make_git_repo

from ctx04_core.output import retrieval_json
from ctx04_core.pipeline import retrieve
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings, SettingsError
from ctx04_core.stages.assemble import assemble
from ctx04_core.stages.prune import prune
from ctx04_core.stages.query import build_query
from ctx04_core.types import Candidate, ContextSlice, RankedCandidate

TASK = (
    "Cart.total is wrong with a coupon: the rate of the coupon code is applied to the "
    "amount, then round_money."
)


@pytest.fixture
def shop(tmp_path: Path, indexed: Callable[..., Repo]) -> Repo:
    return indexed(make_git_repo(tmp_path / "shop", SHOP))


def ranked(repo: Repo, *qualnames: str) -> tuple[RankedCandidate, ...]:
    nodes = {
        n.qualname: n for path in ("shop/cart.py", "shop/pricing.py")
        for n in repo.index.file_nodes(path)
    }
    return tuple(
        RankedCandidate(Candidate(nodes[q].span, nodes[q].kind, q, ("test",)), rank, 1.0)
        for rank, q in enumerate(qualnames, start=1)
    )


def sliced(repo: Repo, order: tuple[RankedCandidate, ...], budget: int) -> ContextSlice:
    settings = Settings(slice_shape="value", budget_tokens=budget)
    query = build_query(TASK, names=repo.index.names(), settings=settings)
    excerpts = prune(query=query, ranked=order, repo=repo, settings=settings)
    return assemble(excerpts=tuple(excerpts), diagnostics=(), repo=repo, settings=settings)


def shown(context: ContextSlice) -> list[tuple[str | None, str, list[int], bool]]:
    return [
        (e.excerpt.ranked.candidate.qualname, e.excerpt.shown_as,
         [n for n, _ in e.excerpt.lines], e.included)
        for e in context.entries
    ]


def test_the_leader_whole_the_next_pruned_the_last_as_its_signature(shop: Repo) -> None:
    order = ranked(shop, "shop.cart.Cart.total", "shop.cart.Cart.add", "shop.pricing.round_money")
    # With room for everything, the first three (value_ranks) are whole and
    # the fourth is not shown at all.
    fourth = ranked(
        shop, "shop.cart.Cart.total", "shop.cart.Cart.add", "shop.pricing.round_money",
        "shop.pricing.apply_discount",
    )
    assert [(q, how) for q, how, _, _ in shown(sliced(shop, fourth, 4000))] == [
        ("shop.cart.Cart.total", "whole"), ("shop.cart.Cart.add", "whole"),
        ("shop.pricing.round_money", "whole"),
    ]
    # 210 tokens: total whole (91 planned), add's whole body (93) no longer
    # fits the 90 left, its signature and best line (the docstring) do (61);
    # round_money's signature fits the 29 left.
    context = sliced(shop, order, 210)
    assert shown(context) == [
        ("shop.cart.Cart.total", "whole", [41, 42, 43, 44, 45, 46], True),
        ("shop.cart.Cart.add", "pruned", [28, 29], True),
        ("shop.pricing.round_money", "signature", [12], True),
    ]
    assert context.tokens == 210
    # Five tokens fewer: round_money's signature no longer fits the plan, is
    # handed on as the smallest form and cut by assemble, named as omitted;
    # the planned entries stay.
    context = sliced(shop, order, 205)
    assert [included for *_, included in shown(context)] == [True, True, False]
    assert context.tokens == 181
    assert [(d.kind, d.reason, d.detail) for d in context.diagnostics] == [
        ("omitted", "token budget", "shop.pricing.round_money")
    ]


def test_a_leader_too_large_for_the_budget_falls_back_to_its_best_lines(shop: Repo) -> None:
    order = ranked(shop, "shop.cart.Cart.add", "shop.cart.Cart.total")
    # add's whole body costs 93 planned tokens: at 122 (93 left after the
    # header and closing) it is whole, at 121 it is its signature and best line.
    assert shown(sliced(shop, order, 122))[0] == (
        "shop.cart.Cart.add", "whole", [28, 29, 30, 31, 32], True
    )
    for budget in (121, 100, 90):
        context = sliced(shop, order, budget)
        assert shown(context)[0] == ("shop.cart.Cart.add", "pruned", [28, 29], True)
        assert context.tokens <= budget


def test_a_body_past_the_length_cap_is_pruned(shop: Repo) -> None:
    order = ranked(shop, "shop.cart.Cart.total")
    settings = Settings(slice_shape="value", whole_body_max_lines=5)
    query = build_query(TASK, names=shop.index.names(), settings=settings)
    [excerpt] = prune(query=query, ranked=order, repo=shop, settings=settings)
    # total has six own lines: past a cap of 5 it shows its signature and its
    # best line, the call of round_money.
    assert (excerpt.shown_as, [n for n, _ in excerpt.lines]) == ("pruned", [41, 46])


def test_the_json_says_how_each_candidate_was_shown(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "shop", SHOP)
    data = retrieval_json(retrieve(TASK, root, settings=Settings(slice_shape="value")))
    for candidate in data["candidates"]:
        assert candidate["shown_as"] == (
            candidate["shown_as"] if candidate["included"] else None
        )
        assert candidate["included"] == (candidate["shown_as"] in ("whole", "pruned", "signature"))
    assert data["candidates"][0]["shown_as"] == "whole"


def test_an_unknown_slice_shape_is_refused() -> None:
    with pytest.raises(SettingsError, match="slice_shape is one of value, signatures"):
        Settings(slice_shape="everything")
