"""Placing a candidate no signal weighs (``Recall.placed``) among the ranked ones."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from conftest import SHOP, make_git_repo

from ctx04_core import retrieve
from ctx04_core.graph import definitions_within
from ctx04_core.repository import Repo
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


A_MODULE = Candidate(Span("a.py", 1, 40), "module", "a", ("leading_module",))


def test_the_leading_files_module_is_placed_at_its_rank_or_moved_up_to_it() -> None:
    order = ranked("a.py", "b.py", "a.py", "c.py", "d.py")
    placement = place(order, [], Settings(leading_module_rank=3), A_MODULE)
    assert shown(placement.ranked) == [
        (1, "a.py"), (2, "b.py"), (3, "a.py"), (4, "a.py"), (5, "c.py"), (6, "d.py"),
    ]
    assert placement.ranked[2].candidate == A_MODULE and placement.placed_ranks == (3,)
    excerpts = [Excerpt(r, ()) for r in (order[1], order[2], replace(order[4], rank=9))]
    assert [placement.renumbered(e).ranked.rank for e in excerpts] == [2, 4, 10]
    # Ranked further down (with its signals): it moves up, nothing is added.
    ranked_module = RankedCandidate(replace(A_MODULE, sources=("ripgrep",)), 6, 0.1)
    moved = place([*order, ranked_module], [], Settings(leading_module_rank=2), A_MODULE)
    assert shown(moved.ranked) == [
        (1, "a.py"), (2, "a.py"), (3, "b.py"), (4, "a.py"), (5, "c.py"), (6, "d.py"),
    ]
    assert moved.ranked[1].candidate.sources == ("ripgrep",) and moved.placed_ranks == ()
    assert moved.new_ranks == (1, 3, 4, 5, 6, 2)
    # Ranked before its rank, off, or a ranking that ends before: nothing changes.
    assert place([*order, ranked_module], [], Settings(leading_module_rank=6),
                 A_MODULE).ranked == (*order, ranked_module)
    for settings in (Settings(leading_module_rank=0), Settings(leading_module_rank=7)):
        kept = place(order, [], settings, A_MODULE)
        assert (kept.ranked, kept.placed_ranks) == (tuple(order), ())
        assert kept.new_ranks == (1, 2, 3, 4, 5)
    last = place(order, [], Settings(leading_module_rank=6), A_MODULE)
    assert shown(last.ranked)[-1] == (6, "a.py") and last.placed_ranks == (6,)


def test_a_retrieval_names_the_leading_files_module_among_its_first_candidates(
    tmp_path: Path,
) -> None:
    root = make_git_repo(tmp_path / "repo", SHOP)
    task = "Cart.total() rounds the discounted subtotal wrongly"
    off = retrieve(task, root, disable=["pin"], settings=Settings(leading_module_rank=0))
    second = retrieve(task, root, disable=["pin"], settings=Settings(leading_module_rank=2))
    # The leading file's module, ranked eighth, moves up to second (with its
    # signals and its shown first line); nothing else changes order.
    assert [(r.rank, r.candidate.qualname) for r in off.candidates][:8] == [
        (1, "shop.cart.Cart.total"), (2, "shop.cart.LineItem.subtotal"), (3, "shop.cart.Cart"),
        (4, "shop.cart.Cart.apply_coupon"), (5, "shop"), (6, "shop.shipping.shipping_cost"),
        (7, "tests.test_cart.test_total_with_coupon"), (8, "shop.cart"),
    ]
    assert [r.candidate for r in second.candidates] == [
        off.candidates[0].candidate, off.candidates[7].candidate,
        *(r.candidate for r in off.candidates[1:7]), *(r.candidate for r in off.candidates[8:]),
    ]
    assert second.candidates[1].candidate.sources == ("bm25",)
    # The slice shows the same excerpts, in the new rank order.
    entries = [(e.excerpt.ranked.rank, e.excerpt.ranked.candidate.qualname)
               for e in second.context.entries]
    assert entries[:3] == [(1, "shop.cart.Cart.total"), (2, "shop.cart"),
                           (3, "shop.cart.LineItem.subtotal")]
    assert [r for r, _ in entries] == sorted(r for r, _ in entries)
    assert sorted(e.text for e in second.context.entries) == sorted(
        e.text for e in off.context.entries)


def test_a_met_files_container_past_the_fifth_place_comes_after_the_rest() -> None:
    order = ranked("a.py", "b.py", "a.py", "c.py", "b.py", "b.py", "d.py", "a.py", "c.py",
                   "g.py", "h.py")
    kinds = {5: "class", 6: "class", 7: "class", 8: "module"}  # by index: ranks 6 to 9
    order = [replace(r, candidate=replace(r.candidate, kind=kinds.get(i, "function")))
             for i, r in enumerate(order)]
    placement = place(order, [], Settings(), A_MODULE)
    # b.py's class and c.py's module (files the first five hold) follow d.py's
    # class (a file met first here: it keeps its place among the files),
    # a.py's class and the placed module (the leader's file); the first five
    # keep their places, g.py's function moves down one for the module.
    assert [(r.rank, r.candidate.span.path, r.candidate.kind) for r in placement.ranked] == [
        (1, "a.py", "function"), (2, "b.py", "function"), (3, "a.py", "function"),
        (4, "c.py", "function"), (5, "b.py", "function"), (6, "d.py", "class"),
        (7, "a.py", "class"), (8, "a.py", "module"), (9, "b.py", "class"),
        (10, "c.py", "module"), (11, "g.py", "function"), (12, "h.py", "function"),
    ]
    assert placement.placed_ranks == (8,)
    assert placement.new_ranks == (1, 2, 3, 4, 5, 9, 6, 7, 10, 11, 12)
    # Off with the module: nothing moves.
    kept = place(order, [], Settings(leading_module_rank=0), A_MODULE)
    assert kept.ranked == tuple(order)


def test_the_leading_module_moves_up_to_where_a_reader_of_containers_meets_it() -> None:
    order = ranked("a.py", "b.py", "a.py", "c.py", "b.py", "d.py", "a.py", "e.py", "a.py",
                   "g.py", "h.py")
    kinds = {5: "class", 7: "class"}  # by index: d.py's class sixth, e.py's eighth
    order = [replace(r, candidate=replace(r.candidate, kind=kinds.get(i, "function")))
             for i, r in enumerate(order)]
    held = {"d.py": 3, "e.py": 20}

    def within(candidate: Candidate) -> tuple[str, ...]:
        path = candidate.span.path
        return tuple(f"{path}.m{i}" for i in range(held.get(path, 0)))

    # Read as their members, the classes put a tenth-placed module at the
    # 33rd definition read (5 + 1 + 3 + 1 + 1 + 20 + 1 + 1); seventh, a
    # reader meets it tenth (5 + 1 + 3, then it).
    placement = place(order, [], Settings(), A_MODULE, within)
    assert placement.ranked[6].candidate == A_MODULE and placement.placed_ranks == (7,)
    assert placement.new_ranks == (1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12)
    # Met within the first ten already (empty classes), it stays tenth.
    held.update({"d.py": 0, "e.py": 0})
    assert place(order, [], Settings(), A_MODULE, within).placed_ranks == (10,)
    # A container among the first five that alone fills a reader's first ten:
    # no place past the fifth is met in time, so the module stays tenth.
    first = [replace(order[0], candidate=replace(order[0].candidate, kind="class")), *order[1:]]
    held.update({"a.py": 12, "d.py": 3, "e.py": 20})
    assert place(first, [], Settings(), A_MODULE, within).placed_ranks == (10,)
    # A definition is read once: the class's three methods ranked after it
    # take no place of their own, so the module is met tenth where it is.
    methods = ranked("a.py", "b.py", "c.py", "b.py", "c.py", "d.py", "d.py", "d.py", "d.py",
                     "g.py")
    methods[5] = replace(methods[5], candidate=replace(methods[5].candidate, kind="class"))

    def ranked_members(candidate: Candidate) -> tuple[str, ...]:
        return ("m.f7", "m.f8", "m.f9") if candidate.kind == "class" else ()

    assert place(methods, [], Settings(), A_MODULE, ranked_members).placed_ranks == (10,)


def test_a_container_holds_the_definitions_within_its_span(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    repo = indexed(make_git_repo(tmp_path / "repo", SHOP))
    by_name = {n.qualname: n for n in repo.index.file_nodes("shop/cart.py")}

    def held(qualname: str) -> tuple[str, ...]:
        node = by_name[qualname]
        return definitions_within(repo, Candidate(node.span, node.kind, node.qualname, ()))

    cart = ("__init__", "add", "remove", "apply_coupon", "total")
    assert held("shop.cart.Cart") == tuple(f"shop.cart.Cart.{name}" for name in cart)
    # The module: its two classes and their six methods, in file order.
    assert held("shop.cart") == (
        "shop.cart.LineItem", "shop.cart.LineItem.subtotal", "shop.cart.Cart",
        *(f"shop.cart.Cart.{name}" for name in cart),
    )
    assert held("shop.cart.Cart.total") == ()
