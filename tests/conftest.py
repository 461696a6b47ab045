"""Shared fixtures: real git repositories in temp folders, real indexes."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from model_server import StandIn
from model_server import start as start_model_server

from ctx04_core.pipeline import open_repo
from ctx04_core.plugins import plugin_manager
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def make_git_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    """A real git repository with ``files`` committed once."""
    root.mkdir(parents=True, exist_ok=True)
    write_files(root, files)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", *args], cwd=root, env=GIT_ENV, check=True)
    return root


# CI's second pytest run (.ci/run) takes this profile: each property test ten
# thousand times, where the quick default draws a hundred examples.
hypothesis_settings.register_profile("thorough", max_examples=10_000)


def shared_repo(
    factory: pytest.TempPathFactory, files: dict[str, str | bytes]
) -> Iterator[Repo]:
    """A real indexed repository for a module-scoped fixture (``yield from``):
    hypothesis runs many examples per test, and they may share one
    repository when the code under test only reads it."""
    root = make_git_repo(factory.mktemp("props") / "repo", files)
    opened, _ = open_repo(
        root.resolve(), plugin_manager(), Settings(), index_dir=factory.mktemp("index")
    )
    yield opened
    opened.index.close()

@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexes go to a temp cache, never the developer's, no config file is
    read from the developer's config folder, no plugin is disabled, no model
    is configured and the weighted fusion ranks: the exact orders the tests
    expect are the weighted formula's, which a refitted ranking model must not
    move. The tests of the learned fusion, the default one, ask for it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    for name in ("CTX04_DISABLE", "CTX04_MODEL_URL", "CTX04_MODEL", "CTX04_MODEL_LOCALITY",
                 "CTX04_MODEL_API_KEY", "CTX04_MEANING_ENCODER", "CTX04_MEANING_MODEL",
                 "CTX04_RANKING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CTX04_FUSION", "weighted")


@pytest.fixture
def indexed() -> Iterator[Callable[..., Repo]]:
    """Open (building it) the real index of a repository: ``indexed(root, disable=())``."""
    opened: list[Repo] = []

    def open_indexed(root: Path, disable: tuple[str, ...] = (), **overrides: object) -> Repo:
        settings = Settings().with_overrides(**overrides)
        repo, _ = open_repo(root.resolve(), plugin_manager(disable=disable), settings)
        opened.append(repo)
        return repo

    yield open_indexed
    for repo in opened:
        repo.index.close()


# Every plugin the dev install registers (requirements-dev.txt), by entry-point name.
INSTALLED_PLUGINS = [
    "apidesc", "assemble", "bm25", "c", "callgraph", "cpp", "dependence", "door", "go", "history",
    "java", "javascript", "meaning", "members", "php", "pin", "prune", "python", "query_model",
    "rerank", "ripgrep", "ruby", "rust", "tests", "traceback", "typescript", "unparsed", "vet",
    "worker_exit",
]


# A small but realistic package: a task about one of its functions should
# bring that function to the top.
SHOP: dict[str, str | bytes] = {
    "shop/__init__.py": '"""A tiny shop."""\nfrom .cart import Cart\n\n__all__ = ["Cart"]\n',
    "shop/cart.py": '''"""Shopping cart."""
from __future__ import annotations

from dataclasses import dataclass

from .inventory import Inventory
from .pricing import apply_discount, round_money


@dataclass
class LineItem:
    sku: str
    quantity: int
    unit_price: float

    def subtotal(self) -> float:
        return self.quantity * self.unit_price


class Cart:
    """A customer's cart of line items."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.items: list[LineItem] = []
        self.coupon: str | None = None

    def add(self, sku: str, quantity: int = 1) -> None:
        """Add ``quantity`` units of ``sku`` from the inventory."""
        price = self.inventory.price_of(sku)
        self.inventory.reserve(sku, quantity)
        self.items.append(LineItem(sku, quantity, price))

    def remove(self, sku: str) -> None:
        self.items = [item for item in self.items if item.sku != sku]

    def apply_coupon(self, code: str) -> None:
        """Remember a coupon code to discount the total."""
        self.coupon = code

    def total(self) -> float:
        """The amount to pay: the subtotal less any coupon discount."""
        subtotal = sum(item.subtotal() for item in self.items)
        if self.coupon is not None:
            subtotal = apply_discount(subtotal, self.coupon)
        return round_money(subtotal)
''',
    "shop/pricing.py": '''"""Prices, coupons and rounding."""

COUPONS = {"SAVE10": 0.10, "HALF": 0.50}


def apply_discount(amount: float, code: str) -> float:
    """Reduce the amount by the coupon's percentage; unknown codes change nothing."""
    rate = COUPONS.get(code, 0.0)
    return amount * (1 - rate)


def round_money(amount: float) -> float:
    """Round to whole cents, half up."""
    return int(amount * 100 + 0.5) / 100
''',
    "shop/inventory.py": '''"""Stock levels and prices."""


class OutOfStock(Exception):
    """Raised when a reservation asks for more than is in stock."""


class Inventory:
    def __init__(self, stock: dict[str, int], prices: dict[str, float]) -> None:
        self.stock = stock
        self.prices = prices

    def price_of(self, sku: str) -> float:
        return self.prices[sku]

    def reserve(self, sku: str, quantity: int) -> None:
        """Take ``quantity`` units out of stock."""
        if self.stock.get(sku, 0) < quantity:
            raise OutOfStock(sku)
        self.stock[sku] -= quantity
''',
    "shop/shipping.py": '''"""Shipping costs."""

FREE_SHIPPING_OVER = 50.0


def shipping_cost(total: float, weight_kg: float) -> float:
    """Flat rate per kilogram, free above FREE_SHIPPING_OVER."""
    if total >= FREE_SHIPPING_OVER:
        return 0.0
    return 4.5 + 1.2 * weight_kg
''',
    "tests/test_cart.py": '''from shop.cart import Cart
from shop.inventory import Inventory


def test_total_with_coupon():
    cart = Cart(Inventory({"a": 3}, {"a": 10.0}))
    cart.add("a", 2)
    cart.apply_coupon("SAVE10")
    assert cart.total() == 18.0
''',
    "README.md": "# shop\n\nA tiny shop used as a test fixture.\n",
}


@pytest.fixture(scope="session")
def stand_in_model() -> Iterator[StandIn]:
    """The stand-in chat-completions server (tests/model_server.py), one per session."""
    stand_in, server = start_model_server()
    yield stand_in
    server.shutdown()
    server.server_close()


@pytest.fixture
def model(stand_in_model: StandIn) -> StandIn:
    """The stand-in model with an empty script and no recorded request."""
    stand_in_model.reset()
    return stand_in_model
