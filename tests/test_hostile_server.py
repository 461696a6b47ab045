"""A warm ``ctx04 mcp`` whose folders are replaced under it, and clients that ask too much.

Each test starts its own server over stdio with the MCP SDK's client (the
helpers of test_mcp_server.py), changes the file system under it as a user
or a cleaner would, and asserts on what the next calls answer.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from conftest import SHOP, make_git_repo
from test_mcp_server import TASK, Server, stdio_session, text_of

from ctx04_core.index.opening import DB_NAME
from ctx04_core.index.store import CodeIndex


@contextmanager
def served(repo: Path, cache: Path, roots: list[Path] | None = None) -> Iterator[Server]:
    """A warm server given ``--repo REPO``, for the calls of one test; with ``roots``, its
    client offers these roots."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_session(repo, cache, roots=roots)) as session,
    ):
        yield Server(portal, session, repo, cache)


def index_folder(repo: Path, cache: Path) -> Path:
    """The folder of the index a server with this cache keeps for ``repo``."""
    return cache / "ctx04" / CodeIndex.location(repo).parent.name


def shown(text: str, qualname: str) -> tuple[str, list[str]]:
    """The excerpt of the slice headed by ``qualname``: its "path:lines, sha256:digest"
    label and its lines."""
    [found] = [part for part in text.split("\n\n") if part.startswith(f"### {qualname} [")]
    header, *lines = found.splitlines()
    label = ", ".join(header.removeprefix(f"### {qualname} [").split(", ")[:2])
    return label, lines


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@pytest.mark.parametrize("deleted", ["index folder", "cache folder"])
def test_an_index_deleted_under_a_warm_server_is_built_again(
    deleted: str, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "shop", SHOP).resolve()
    cache = tmp_path / "cache"
    index = index_folder(repo, cache)
    with served(repo, cache) as server:
        first = server.call("retrieve", task=TASK)
        assert index.joinpath(DB_NAME).is_file()
        shutil.rmtree(index if deleted == "index folder" else cache)
        again = server.call("retrieve", task=TASK)
        assert not again.is_error, text_of(again)
        assert index.joinpath(DB_NAME).is_file()
        assert again.structured_content is not None
        assert again.structured_content["candidates"][0]["qualname"] == "shop.cart.Cart.total"
        assert text_of(again) == text_of(first)
        shutil.rmtree(index)
        counts = server.call("index")
    assert not counts.is_error, text_of(counts)
    assert counts.structured_content is not None
    assert {k: counts.structured_content[k] for k in ("files", "parsed", "unchanged")} == {
        "files": 6, "parsed": 6, "unchanged": 0,
    }
    assert index.joinpath(DB_NAME).is_file()


CART = str(SHOP["shop/cart.py"])
TOP = "# Vendored from the shop service.\n# Keep in step with upstream.\n#\n# Owner: payments\n\n"
EMPTY = '''
    def empty(self) -> None:
        """Take every line item and the coupon out of the cart."""
        self.items = []
        self.coupon = None
'''
EMPTY_TASK = "Cart.empty() should take every line item and the coupon out of the cart"


def test_a_root_deleted_and_cloned_again_is_served_fresh(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "shop", SHOP).resolve()
    with served(repo, tmp_path / "cache") as server:
        assert not server.call("retrieve", task=TASK).is_error
        shutil.rmtree(repo)
        for tool, arguments in (("retrieve", {"task": TASK}), ("index", {})):
            missing = server.call(tool, **arguments)
            assert missing.is_error
            assert text_of(missing) == (
                f"Error executing tool {tool}: repository not found: {repo}"
            )
        cloned = TOP + CART + EMPTY
        make_git_repo(repo, {**SHOP, "shop/cart.py": cloned})
        fresh = text_of(server.call("retrieve", task=EMPTY_TASK))
        edited = "# Edited after the clone.\n" + cloned
        (repo / "shop/cart.py").write_text(edited, encoding="utf-8")
        after_edit = text_of(server.call("retrieve", task=TASK))
    assert shown(fresh, "shop.cart.Cart.empty") == (
        f"shop/cart.py:53-56, sha256:{digest(cloned)}",
        [
            "    def empty(self) -> None:",
            '        """Take every line item and the coupon out of the cart."""',
            "        self.items = []",
            "        self.coupon = None",
        ],
    )
    assert shown(after_edit, "shop.cart.Cart.total") == (
        f"shop/cart.py:47-52, sha256:{digest(edited)}",
        [
            "    def total(self) -> float:",
            '        """The amount to pay: the subtotal less any coupon discount."""',
            "        subtotal = sum(item.subtotal() for item in self.items)",
            "        if self.coupon is not None:",
            "            subtotal = apply_discount(subtotal, self.coupon)",
            "        return round_money(subtotal)",
        ],
    )


def test_client_roots_never_widen_the_repo_option(tmp_path: Path) -> None:
    allowed = (tmp_path / "allowed").resolve()
    inside = make_git_repo(allowed / "shop", SHOP)
    outside = make_git_repo(tmp_path / "elsewhere", SHOP).resolve()
    with served(allowed, tmp_path / "cache", roots=[Path("/")]) as server:  # file:///
        refused = [
            server.call("retrieve", task=TASK, repo=str(outside)),
            server.call("index", repo=str(outside)),
        ]
        granted = server.call("retrieve", task=TASK, repo=str(inside))
    assert [text_of(result) for result in refused] == [
        f"Error executing tool {tool}: repository {outside} is outside the allowed roots "
        f"({allowed})"
        for tool in ("retrieve", "index")
    ]
    assert granted.structured_content is not None
    assert granted.structured_content["repo"]["root"] == str(inside)
    assert granted.structured_content["candidates"][0]["qualname"] == "shop.cart.Cart.total"


def test_client_roots_narrow_the_repo_option(tmp_path: Path) -> None:
    projects = (tmp_path / "projects").resolve()
    shop = make_git_repo(projects / "shop", SHOP)
    other = make_git_repo(projects / "other", SHOP)
    unrelated = (tmp_path / "unrelated").resolve()
    with served(projects, tmp_path / "cache", roots=[shop]) as server:
        default = server.call("retrieve", task=TASK)
        sibling = server.call("retrieve", task=TASK, repo=str(other))
    with served(projects, tmp_path / "cache", roots=[unrelated]) as server:
        disjoint = server.call("retrieve", task=TASK)
    assert default.structured_content is not None
    assert default.structured_content["repo"]["root"] == str(shop)
    assert text_of(sibling) == (
        f"Error executing tool retrieve: repository {other} is outside the allowed roots "
        f"({shop})"
    )
    # Roots with nothing in common with --repo leave it as it is.
    assert disjoint.structured_content is not None
    assert disjoint.structured_content["repo"]["root"] == str(projects)
