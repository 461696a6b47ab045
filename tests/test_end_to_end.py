"""The whole pipeline through the Python API on a small realistic repository."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from conftest import INSTALLED_PLUGINS, SHOP, make_git_repo

from ctx04_core import retrieve
from ctx04_core.output import retrieval_json
from ctx04_core.settings import Settings
from ctx04_core.tokens import count_tokens


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "shop", SHOP)


def test_the_function_a_task_names_ranks_first(shop: Path) -> None:
    result = retrieve("Cart.total() rounds the discounted subtotal wrongly", shop)

    assert result.query.identifiers == ("Cart.total", "Cart", "total", "subtotal")
    assert result.query.goal_hint == "Cart.total() rounds the discounted subtotal wrongly"
    top = result.candidates[0].candidate
    assert (top.qualname, top.span.path, top.span.start_line, top.span.end_line) == (
        "shop.cart.Cart.total", "shop/cart.py", 41, 46,
    )
    # Recalled by three sources, and proposed again as a member of Cart (rank 3).
    assert top.sources == ("apidesc", "bm25", "members", "ripgrep")
    cart = hashlib.sha256((shop / "shop/cart.py").read_bytes()).hexdigest()
    assert result.context.text.startswith(
        "## Context slice (retrieved — untrusted data)\n\n"
        f"### shop.cart.Cart.total [shop/cart.py:41-46, sha256:{cart[:12]}, "
        "apidesc, bm25, members, ripgrep]\n"
        "    def total(self) -> float:\n"
    )
    assert result.context.text.endswith(
        "\nCoverage: nothing cut or refused; recall is not exhaustive.\n"
    )
    assert result.context.tokens == count_tokens(result.context.text) <= 4000


def test_a_task_described_in_prose_finds_the_method(shop: Path) -> None:
    result = retrieve(
        "Inventory.reserve lets the stock go negative instead of raising OutOfStock", shop
    )
    assert result.candidates[0].candidate.qualname == "shop.inventory.Inventory.reserve"


def test_the_json_is_the_documented_schema(shop: Path) -> None:
    result = retrieve("Cart.total() rounds the discounted subtotal wrongly", shop)
    data = retrieval_json(result)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=shop, capture_output=True, text=True, check=True
    ).stdout.strip()

    assert list(data) == [
        "schema", "repo", "query", "budget_tokens", "tokens", "candidates", "references",
        "diagnostics",
    ]
    assert data["schema"] == "ctx04.context-slice.v1"
    assert data["repo"] == {"root": str(shop.resolve()), "base": head}
    assert list(data["query"]) == [
        "identifiers", "unresolved", "error_strings", "test_names", "file_paths", "goal_hint",
    ]
    assert data["budget_tokens"] == 4000
    first = data["candidates"][0]
    assert list(first) == [
        "rank", "path", "start_line", "end_line", "qualname", "kind", "sources", "score",
        "signals", "included", "tokens", "shown_as", "text",
    ]
    # Why it ranked first: each signal's value, and the fused score they give.
    signals = first["signals"]
    assert list(signals) == [
        "auxiliary", "bm25", "definition", "history", "history_definition", "meaning",
        "neighbour", "path", "pin", "pointed_at", "title",
    ]
    assert (signals["auxiliary"], signals["pointed_at"], signals["pin"]) == (0.0, 0.0, 0.0)
    assert first["score"] == pytest.approx(
        signals["bm25"] * (1 + 2.0 * signals["definition"]) * (1 + 0.3 * signals["history"])
        * (1 + 2.0 * signals["meaning"]) * (1 + 0.5 * signals["neighbour"])
        * (1 + 0.25 * signals["path"]),
        abs=1e-4,
    )
    assert [c["rank"] for c in data["candidates"]] == list(range(1, len(data["candidates"]) + 1))
    included = [c for c in data["candidates"] if c["included"]]
    # After the ranked entries, the leading file's import statements (a
    # reference of source head, ranked past the 16 candidates).
    imports = [e for e in result.context.entries if e.included][len(included):]
    assert [(e.excerpt.ranked.rank, e.excerpt.ranked.candidate.sources,
             [n for n, _ in e.excerpt.lines]) for e in imports] == [
        (17, ("head",), [2, 3, 4, 5, 6, 7, 8, 9]),
    ]
    # The slice is the header, exactly the included entries' texts, the coverage line.
    assert result.context.text == (
        "## Context slice (retrieved — untrusted data)\n\n" + "".join(c["text"] for c in included)
        + imports[0].text + "Coverage: nothing cut or refused; recall is not exhaustive.\n"
    )
    # One source reference per rendered excerpt, in rank order.
    assert [r["rank"] for r in data["references"]] == [c["rank"] for c in included] + [17]
    first_ref = data["references"][0]
    assert list(first_ref) == [
        "schema", "path", "start_line", "end_line", "content_digest", "excerpt_digest",
        "shortened", "base", "rank", "text",
    ]
    assert first_ref["schema"] == "ctx04.source-ref.v1"
    assert first_ref["content_digest"] == hashlib.sha256(
        (shop / first_ref["path"]).read_bytes()
    ).hexdigest()
    assert first_ref["excerpt_digest"] == hashlib.sha256(first_ref["text"].encode()).hexdigest()
    assert (first_ref["base"], first_ref["shortened"]) == (head, False)
    assert data["diagnostics"]["plugins"] == INSTALLED_PLUGINS
    assert data["diagnostics"]["settings"]["budget_tokens"] == 4000


def test_a_smaller_budget_is_never_exceeded_and_drops_the_lowest_ranked(shop: Path) -> None:
    full = retrieve("Cart.total() rounds the discounted subtotal wrongly", shop)
    small = retrieve(
        "Cart.total() rounds the discounted subtotal wrongly", shop,
        settings=Settings(budget_tokens=150),
    )
    assert small.context.tokens == count_tokens(small.context.text) <= 150
    kept = [e.excerpt.ranked.rank for e in small.context.entries if e.included]
    assert kept == list(range(1, len(kept) + 1))
    assert 0 < len(kept) < sum(e.included for e in full.context.entries)
    omitted = len(small.context.entries) - len(kept)
    # The excerpts fill the 150 tokens: the coverage line is its short form.
    assert small.context.text.endswith(f"Coverage: omitted {omitted}; not exhaustive.\n")
    cut = [d.path for d in small.diagnostics if (d.kind, d.reason) == ("omitted", "token budget")]
    assert len(cut) == omitted
    assert {"shop/cart.py", "shop/__init__.py", "shop/shipping.py"} <= set(cut)


def test_only_chooses_the_stages_an_agent_harness_wants(shop: Path) -> None:
    result = retrieve(
        "Cart.total() rounds the discounted subtotal wrongly", shop,
        only=["python", "ripgrep", "assemble"],
    )
    assert result.plugins == ("assemble", "python", "ripgrep")
    assert {s for r in result.candidates for s in r.candidate.sources} == {"ripgrep"}
    # Without rerank and prune, merged order and whole spans are what the slice shows.
    assert result.candidates[0].score == 0.0


def test_a_folder_that_is_not_a_git_repository_has_no_base(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "mod.py").write_text("def parse_header(raw):\n    return raw.split(':')\n")
    result = retrieve("parse_header splits on every colon", root)
    assert result.base is None
    assert result.candidates[0].candidate.qualname == "mod.parse_header"


def test_a_language_without_a_parser_is_searched_and_reported(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", {
        "app/main.py": "def start():\n    return 1\n",
        "app/Billing.kt": "class Billing {\n    fun charge_twice() = 2\n}\n",
    })
    result = retrieve("charge_twice bills the customer twice", root)
    assert result.index.failures == (
        ("app/Billing.kt", "no_parser", "no enabled plugin parses this file"),
    )
    top = result.candidates[0].candidate
    assert (top.kind, top.qualname, top.span.path, top.sources) == (
        "lines", None, "app/Billing.kt", ("ripgrep",),
    )
    assert (top.span.start_line, top.span.end_line) == (2, 2)
