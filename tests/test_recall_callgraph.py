"""Call-graph recall: one hop over the real index's edges."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ctx04_recall_callgraph as callgraph
from conftest import make_git_repo

from ctx04_core.memo import RetrievalMemo
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Diagnostic, Query, RankedCandidate, Recall, Span

Indexed = Callable[..., Repo]

SHOP: dict[str, str | bytes] = {
    "shop/__init__.py": "",
    "shop/prices.py": "class Money:\n    pass\n",
    "shop/cart.py": (
        "from shop.prices import Money\n"             # 1
        "\n"
        "\n"
        "class Cart:\n"                                # 4
        "    def total(self) -> Money:\n"              # 5
        "        return sum_prices(self.items)\n"      # 6
        "\n"
        "    def checkout(self):\n"                    # 8
        "        return charge(self.total())\n"        # 9
        "\n"
        "\n"
        "def sum_prices(items):\n"                     # 12
        "    return sum(items)\n"
        "\n"
        "\n"
        "def charge(amount):\n"                        # 16
        "    return amount\n"
    ),
    "shop/api.py": (
        "from shop.cart import Cart\n"
        "\n"
        "\n"
        "def buy(cart: Cart):\n"                       # 4
        "    return cart.total()\n"
        "\n"
        "\n"
        "Cart().total()\n"  # a call at module level: a module is not a candidate
    ),
}


def query(*identifiers: str) -> Query:
    return Query(
        task_text="", identifiers=identifiers, unresolved=(), error_strings=(), test_names=(),
        file_paths=(), goal_hint="",
    )


def recall(repo: Repo, q: Query, settings: Settings | None = None) -> Recall:
    result = callgraph.recall(query=q, repo=repo, settings=settings or Settings())
    assert result is not None
    return result


def neighbours(result: Recall) -> list[tuple[str | None, str]]:
    return [(c.qualname, c.terms[0]) for c in result.candidates]


def test_a_method_brings_its_callees_callers_class_and_imported_types(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", SHOP))
    result = recall(repo, query("Cart.total"))
    assert neighbours(result) == [
        ("shop.cart.sum_prices", "Cart.total"),  # callee (``sum`` is a builtin: no definition)
        ("shop.api.buy", "Cart.total"),  # callers, by path
        ("shop.cart.Cart.checkout", "Cart.total"),
        ("shop.cart.Cart", "Cart.total"),  # container
        ("shop.prices.Money", "Cart.total"),  # imported by its module, named in its annotation
    ]
    assert result.candidates[0] == Candidate(
        span=Span("shop/cart.py", 12, 13), kind="function", qualname="shop.cart.sum_prices",
        sources=("callgraph",), terms=("Cart.total",),
    )
    assert result.candidates[3].kind == "class"
    assert result.candidates[3].span == Span("shop/cart.py", 4, 9)
    assert result.diagnostics == ()


def test_a_class_brings_its_methods(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", SHOP))
    result = recall(repo, query("Cart"))
    # ``Cart()`` is only called at module level, so the class has no caller definition.
    assert neighbours(result) == [
        ("shop.cart.Cart.total", "Cart"),
        ("shop.cart.Cart.checkout", "Cart"),
        ("shop.prices.Money", "Cart"),
    ]


def test_seeds_are_not_proposed_and_neighbours_come_once_in_identifier_order(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", SHOP))
    # charge's only neighbour is its caller checkout, itself a seed.
    result = recall(repo, query("charge", "Cart.checkout", "sum_prices"))
    assert neighbours(result) == [
        ("shop.cart.Cart.total", "Cart.checkout"),
        ("shop.cart.Cart", "Cart.checkout"),
    ]


def test_identifiers_without_a_definition_expand_to_nothing(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", SHOP))
    # A module is not a definition; "nowhere" is defined nowhere.
    assert recall(repo, query("shop.cart", "nowhere")) == Recall("callgraph", (), ())


def test_a_caller_is_the_definition_holding_the_call(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {
        "box.py": (
            "def clamp(v):\n"
            "    return v\n"
            "\n"
            "\n"
            "class Box:\n"
            "    @property\n"
            "    def value(self):\n"
            "        return self._v\n"
            "\n"
            "    @value.setter\n"
            "    def value(self, v):\n"
            "        self._v = clamp(v)\n"
        ),
    })
    result = recall(indexed(root), query("clamp"))
    # Getter and setter share the qualname; the call is in the setter.
    assert result.candidates == (
        Candidate(
            span=Span("box.py", 10, 12), kind="method", qualname="box.Box.value",
            sources=("callgraph",), terms=("clamp",),
        ),
    )


def test_imports_resolve_through_re_exports_and_never_to_outside_code(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {
        "shop/__init__.py": "from shop.prices import Money\n",
        "shop/prices.py": "class Money:\n    pass\n",
        "shop/codec.py": "def loads(text):\n    return text\n",
        "shop/report.py": (
            "from json import loads\n"
            "from shop import Money\n"
            "\n"
            "\n"
            "def price(amount: Money, decode=loads):\n"
            "    return amount\n"
        ),
    })
    result = recall(indexed(root), query("price"))
    # ``Money`` reaches shop.prices through the package's re-export; ``loads``
    # is json's, not the repository's namesake in shop/codec.py.
    assert neighbours(result) == [("shop.prices.Money", "price")]


def test_names_resolve_to_every_namesake(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {
        "a.py": "def save(x):\n    return x\n",
        "b.py": "def save(x):\n    return x\n",
        "c.py": "def run(store):\n    return store.save(1)\n",
    })
    result = recall(indexed(root), query("run"))
    # An invoke edge names ``save`` only; which one ``store`` holds is left to the re-rank.
    assert neighbours(result) == [("a.save", "run"), ("b.save", "run")]


def test_more_neighbours_than_the_cap_keeps_the_first(tmp_path: Path, indexed: Indexed) -> None:
    defs = "".join(f"def f{i:02d}():\n    return {i}\n\n\n" for i in range(25))
    calls = "".join(f"    f{i:02d}()\n" for i in range(25))
    root = make_git_repo(tmp_path / "r", {"hub.py": f"{defs}def hub():\n{calls}"})
    repo = indexed(root)
    result = recall(repo, query("hub"))
    assert neighbours(result) == [(f"hub.f{i:02d}", "hub") for i in range(20)]
    assert result.diagnostics == (
        Diagnostic(
            "unavailable", "truncated",
            detail="more than 20 call-graph neighbours, kept the first 20",
        ),
    )
    small = recall(repo, query("hub"), Settings(callgraph_limit=3))
    assert neighbours(small) == [("hub.f00", "hub"), ("hub.f01", "hub"), ("hub.f02", "hub")]
    assert small.diagnostics == (
        Diagnostic(
            "unavailable", "truncated",
            detail="more than 3 call-graph neighbours, kept the first 3",
        ),
    )
    exact = recall(repo, query("hub"), Settings(callgraph_limit=25))
    assert len(exact.candidates) == 25
    assert exact.diagnostics == ()


def test_the_neighbour_signal_scores_one_hop_of_a_named_definition_by_its_rarity(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {
        **SHOP,
        # a second ``total``: the name alone no longer says which one is meant
        "shop/tax.py": (
            "def total(rate):\n    return rate_of(rate)\n\n\ndef rate_of(r):\n    return r\n"
        ),
    })
    repo = indexed(root)
    pool = [*recall(repo, query("Cart.total", "total")).candidates,
            Candidate(Span("shop/cart.py", 16, 17), "function", "shop.cart.charge", ("ripgrep",))]
    worth = callgraph.neighbour_worth(repo, ["Cart.total", "total"], pool, RetrievalMemo())
    # Cart.total names one definition (worth 1), total two (worth 1/2 each);
    # charge is two hops from Cart.total (via checkout): not a neighbour.
    assert dict(zip((c.qualname for c in pool), worth, strict=True)) == {
        "shop.cart.sum_prices": 1.0, "shop.api.buy": 1.0, "shop.cart.Cart.checkout": 1.0,
        "shop.cart.Cart": 1.0, "shop.prices.Money": 1.0, "shop.tax.rate_of": 0.5,
        "shop.cart.charge": 0.0,
    }
    candidates = tuple(recall(repo, query("total")).candidates)
    (signal,) = callgraph.signals(
        query=query("total"), candidates=candidates, repo=repo, settings=Settings(),
        memo=RetrievalMemo(),
    )
    assert (signal.name, signal.mode, signal.weight) == ("neighbour", "scale", 0.5)
    # A weight of 0 (the setting or an override by name) computes nothing.
    for off in (Settings(neighbour_boost=0.0), Settings(signal_weights=("neighbour=0",))):
        assert callgraph.signals(
            query=query("total"), candidates=candidates, repo=repo, settings=off,
            memo=RetrievalMemo(),
        ) is None
    assert dict(zip((c.qualname for c in candidates), signal.values, strict=True)) == {
        "shop.cart.sum_prices": 0.5, "shop.tax.rate_of": 0.5, "shop.api.buy": 0.5,
        "shop.cart.Cart.checkout": 0.5, "shop.cart.Cart": 0.5, "shop.prices.Money": 0.5,
    }


def first_ranking(repo: Repo, *qualnames: str) -> tuple[RankedCandidate, ...]:
    """A first ranking of the named definitions, in that order."""
    nodes = [
        next(n for n in repo.index.lookup(q.rsplit(".", 1)[-1]) if n.qualname == q)
        for q in qualnames
    ]
    return tuple(
        RankedCandidate(
            Candidate(span=n.span, kind=n.kind, qualname=n.qualname, sources=("ripgrep",)),
            rank=rank, score=1.0,
        )
        for rank, n in enumerate(nodes, 1)
    )


def expand(repo: Repo, ranked: tuple[RankedCandidate, ...], **overrides: object) -> Recall | None:
    return callgraph.expand(
        query=query(), ranked=ranked, repo=repo, settings=Settings().with_overrides(**overrides)
    )


def test_the_leading_functions_bring_what_they_call(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", SHOP))
    # A class calls nothing and is passed over; checkout calls charge and
    # total on line 9 (a line's calls by name), total calls sum_prices.
    ranked = first_ranking(
        repo, "shop.cart.Cart", "shop.cart.Cart.checkout", "shop.cart.Cart.total"
    )
    result = expand(repo, ranked)
    assert result == Recall(
        "callees",
        (
            Candidate(span=Span("shop/cart.py", 16, 17), kind="function",
                      qualname="shop.cart.charge", sources=("callees",)),
            Candidate(span=Span("shop/cart.py", 5, 6), kind="method",
                      qualname="shop.cart.Cart.total", sources=("callees",)),
            Candidate(span=Span("shop/cart.py", 12, 13), kind="function",
                      qualname="shop.cart.sum_prices", sources=("callees",)),
        ),
        (),
    )
    only_first = expand(repo, ranked, callee_ranks=1)
    assert only_first is not None
    assert [c.qualname for c in only_first.candidates] == [
        "shop.cart.charge", "shop.cart.Cart.total"
    ]
    assert expand(repo, ranked, callee_ranks=0) is None


def test_a_callee_name_with_many_namesakes_is_left_out(tmp_path: Path, indexed: Indexed) -> None:
    files: dict[str, str | bytes] = {
        f"store{i}.py": "def save(x):\n    return x\n" for i in range(5)
    }
    files["run.py"] = (
        "def flush(x):\n    return x\n\n\ndef run(store):\n    store.save(1)\n    flush(2)\n"
    )
    repo = indexed(make_git_repo(tmp_path / "r", files))
    result = expand(repo, first_ranking(repo, "run.run"))
    # Five definitions of save say nothing about which one run means.
    assert result is not None
    assert [c.qualname for c in result.candidates] == ["run.flush"]


def test_more_callees_than_the_cap_keeps_the_first(tmp_path: Path, indexed: Indexed) -> None:
    defs = "".join(f"def f{i:02d}():\n    return {i}\n\n\n" for i in range(25))
    calls = "".join(f"    f{i:02d}()\n" for i in range(25))
    repo = indexed(make_git_repo(tmp_path / "r", {"hub.py": f"{defs}def hub():\n{calls}"}))
    result = expand(repo, first_ranking(repo, "hub.hub"), callgraph_limit=3)
    assert result is not None
    assert [c.qualname for c in result.candidates] == ["hub.f00", "hub.f01", "hub.f02"]
    assert result.diagnostics == (
        Diagnostic(
            "unavailable", "truncated",
            detail="25 callees of the leading functions, kept the first 3",
        ),
    )
