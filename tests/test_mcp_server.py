"""``ctx04 mcp`` as an agent runs it: a real server process, the MCP SDK's own client.

One stdio server is shared by the module's tests (it stays warm, as in use);
the HTTP transport and the ways a server stops get processes of their own.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from conftest import INSTALLED_PLUGINS, SHOP, make_git_repo
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ListRootsResult, Root, TextContent

from ctx04_core.index.store import CodeIndex

CTX04 = str(Path(sys.executable).parent / "ctx04")
TASK = "Cart.total() rounds the discounted subtotal wrongly"
OTHER_TASK = "shipping_cost is charged although the total is above FREE_SHIPPING_OVER"


@dataclass(frozen=True)
class Server:
    portal: BlockingPortal
    session: ClientSession
    repo: Path
    cache: Path  # XDG_CACHE_HOME of the server: where its index lives

    def call(self, tool: str, **arguments: Any) -> CallToolResult:
        return self.portal.call(self.session.call_tool, tool, arguments)


def server_env(cache: Path) -> dict[str, str]:
    # An empty config folder: the developer's own config file changes nothing
    # here. The weighted fusion ranks, as in every test but the learned one's (conftest).
    return {
        "XDG_CACHE_HOME": str(cache), "XDG_CONFIG_HOME": str(cache / "no-config"),
        "PATH": os.environ["PATH"], "CTX04_FUSION": "weighted",
    }


@asynccontextmanager
async def stdio_session(
    repo: Path | None, cache: Path, *options: str, roots: list[Path] | None = None
) -> AsyncIterator[ClientSession]:
    """A client session with ``ctx04 mcp [--repo REPO] OPTIONS``; with ``roots``, a
    client that offers these roots."""

    async def list_roots(context: object) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=root.as_uri()) for root in roots or ()])

    args = ["mcp", *options] if repo is None else ["mcp", "--repo", str(repo), *options]
    params = StdioServerParameters(command=CTX04, args=args, env=server_env(cache))
    async with (
        stdio_client(params) as (read, write),
        ClientSession(
            read, write, list_roots_callback=list_roots if roots is not None else None
        ) as session,
    ):
        await session.initialize()
        yield session


def call_once(
    repo: Path | None, cache: Path, calls: list[tuple[str, dict[str, Any]]], *options: str,
    roots: list[Path] | None = None,
) -> list[CallToolResult]:
    """The results of ``calls``, in order, from one server started for them."""

    async def run() -> list[CallToolResult]:
        async with stdio_session(repo, cache, *options, roots=roots) as session:
            return [await session.call_tool(tool, arguments) for tool, arguments in calls]

    return anyio.run(run)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("mcp")
    repo = make_git_repo(root / "shop", SHOP).resolve()
    cache = root / "server-cache"
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_session(repo, cache)) as session,
    ):
        yield Server(portal, session, repo, cache)


def cli(*args: str) -> str:
    done = subprocess.run([CTX04, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def text_of(result: CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


def without_timings(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON result less what depends on time and on the index's history."""
    diagnostics = dict(result["diagnostics"])
    index = {k: v for k, v in diagnostics.pop("index").items()
             if k not in ("parsed", "unchanged", "seconds")}
    del diagnostics["seconds"]
    return {**result, "diagnostics": {**diagnostics, "index": index}}


def test_the_four_tools_are_listed_with_their_schemas(server: Server) -> None:
    listed = server.portal.call(server.session.list_tools).tools
    assert [tool.name for tool in listed] == ["retrieve", "vet", "index", "plugins"]
    schemas = {tool.name: tool.input_schema for tool in listed}
    assert list(schemas["retrieve"]["properties"]) == [
        "task", "repo", "test", "error", "budget_tokens", "disable", "profile",
    ]
    assert schemas["retrieve"]["required"] == ["task"]
    assert list(schemas["vet"]["properties"]) == ["artifact"]
    assert list(schemas["index"]["properties"]) == ["repo"]
    assert schemas["plugins"]["properties"] == {}
    retrieve = next(tool for tool in listed if tool.name == "retrieve")
    assert retrieve.description is not None
    assert retrieve.description.startswith("Find the code a task needs: call this first")


def test_retrieve_gives_the_cli_slice_byte_for_byte(server: Server) -> None:
    result = server.call("retrieve", task=TASK)
    assert not result.is_error
    repo = str(server.repo)
    assert text_of(result) == cli("retrieve", TASK, "--repo", repo, "--format", "markdown")
    expected = json.loads(cli("retrieve", TASK, "--repo", repo, "--format", "json"))
    assert result.structured_content is not None
    assert without_timings(result.structured_content) == without_timings(expected)
    assert result.structured_content["candidates"][0]["qualname"] == "shop.cart.Cart.total"


def test_an_edit_between_two_calls_is_in_the_second_slice(server: Server) -> None:
    cart = server.repo / "shop/cart.py"
    before = cart.read_text(encoding="utf-8")
    first = text_of(server.call("retrieve", task=TASK))
    old_digest = hashlib.sha256(before.encode()).hexdigest()[:12]
    assert f"[shop/cart.py:41-46, sha256:{old_digest}," in first
    edited = before.replace(
        "        return round_money(subtotal)\n",
        "        subtotal = max(subtotal, 0.0)  # never negative\n"
        "        return round_money(subtotal)\n",
    )
    try:
        cart.write_text(edited, encoding="utf-8")
        second = text_of(server.call("retrieve", task=TASK))
    finally:
        cart.write_text(before, encoding="utf-8")
    new_digest = hashlib.sha256(edited.encode()).hexdigest()[:12]
    assert "        subtotal = max(subtotal, 0.0)  # never negative\n" in second
    assert f"[shop/cart.py:41-47, sha256:{new_digest}," in second
    assert "never negative" not in first
    # Putting the bytes back is an edit too.
    assert text_of(server.call("retrieve", task=TASK)) == first


def test_a_bad_repository_is_a_one_line_error_and_the_server_goes_on(
    server: Server, tmp_path: Path
) -> None:
    missing = server.call("retrieve", task=TASK, repo=str(server.repo / "missing"))
    assert missing.is_error
    assert text_of(missing) == (
        f"Error executing tool retrieve: repository not found: {server.repo / 'missing'}"
    )
    outside = server.call("retrieve", task=TASK, repo=str(tmp_path))
    assert outside.is_error
    assert text_of(outside) == (
        f"Error executing tool retrieve: repository {tmp_path} is outside the allowed "
        f"roots ({server.repo})"
    )
    unknown = server.call("retrieve", task=TASK, disable=["nonesuch"])
    assert text_of(unknown).startswith(
        "Error executing tool retrieve: no installed plugin named 'nonesuch'; installed: "
    )
    empty = server.call("retrieve", task="  ")
    assert text_of(empty) == (
        "Error executing tool retrieve: the task is empty: give the issue text, "
        "a --task-file or an --error-file"
    )
    for failed in (missing, outside, unknown, empty):
        assert "\n" not in text_of(failed)
    after = server.call("retrieve", task=TASK)
    assert not after.is_error
    assert "### shop.cart.Cart.total [shop/cart.py:41-46" in text_of(after)


def test_without_a_repo_the_client_roots_are_the_allowed_repositories(
    server: Server, tmp_path: Path
) -> None:
    elsewhere = make_git_repo(tmp_path / "elsewhere", SHOP).resolve()
    default, outside = call_once(
        None, tmp_path / "cache",
        [("retrieve", {"task": TASK}), ("retrieve", {"task": TASK, "repo": str(elsewhere)})],
        roots=[server.repo],
    )
    assert text_of(default) == text_of(server.call("retrieve", task=TASK))
    assert outside.is_error
    assert text_of(outside) == (
        f"Error executing tool retrieve: repository {elsewhere} is outside the allowed "
        f"roots ({server.repo})"
    )


def test_a_call_past_the_timeout_is_a_one_line_error_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    # Indexing 2,000 files takes seconds: far past the shortest timeout.
    many = {f"pkg/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(2000)}
    repo = make_git_repo(tmp_path / "many", many).resolve()
    slow, plugins, vet = call_once(
        repo, tmp_path / "cache",
        [("retrieve", {"task": "f7 returns x plus seven"}), ("plugins", {}),
         ("vet", {"artifact": "return x + 7"})],
        "--timeout", "0.1",
    )
    assert slow.is_error
    assert text_of(slow) == (
        "Error executing tool retrieve: no answer within 0.1 s; the work goes on and later "
        f"calls on {repo} wait for it"
    )
    assert not plugins.is_error
    assert not vet.is_error
    assert text_of(vet) == "accepted: checked against 0 retrieved blocks"


def test_a_plugin_disabled_for_one_call_only(server: Server) -> None:
    repo = str(server.repo)
    without = server.call("retrieve", task=TASK, disable=["bm25"])
    assert text_of(without) == cli(
        "retrieve", TASK, "--repo", repo, "--format", "markdown", "--disable", "bm25"
    )
    assert without.structured_content is not None
    assert "bm25" not in without.structured_content["diagnostics"]["plugins"]
    assert "bm25" not in without.structured_content["diagnostics"]["recalled"]
    again = server.call("retrieve", task=TASK)
    assert again.structured_content is not None
    assert "bm25" in again.structured_content["diagnostics"]["plugins"]
    assert again.structured_content["diagnostics"]["recalled"]["bm25"] > 0


def test_budget_and_profile_reach_the_settings(server: Server) -> None:
    result = server.call("retrieve", task=TASK, budget_tokens=300, profile="compact")
    assert text_of(result) == cli(
        "retrieve", TASK, "--repo", str(server.repo), "--format", "markdown",
        "--budget", "300", "--profile", "compact",
    )
    assert result.structured_content is not None
    assert result.structured_content["budget_tokens"] == 300
    assert result.structured_content["diagnostics"]["settings"]["max_quoted_lines"] == 10


def test_two_concurrent_calls_get_what_each_gets_alone(server: Server) -> None:
    alone = [text_of(server.call("retrieve", task=task)) for task in (TASK, OTHER_TASK)]

    async def both() -> list[str]:
        results: dict[str, str] = {}

        async def one(task: str) -> None:
            results[task] = text_of(await server.session.call_tool("retrieve", {"task": task}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(one, TASK)
            tasks.start_soon(one, OTHER_TASK)
        return [results[TASK], results[OTHER_TASK]]

    assert server.portal.call(both) == alone
    assert alone[0] != alone[1]


def test_vet_judges_against_everything_retrieved(server: Server) -> None:
    result = server.call("retrieve", task=TASK)
    assert result.structured_content is not None
    block = result.structured_content["references"][0]["text"]
    copied = server.call("vet", artifact=block)
    assert text_of(copied) == "rejected: verbatim reproduction of untrusted retrieved content"
    assert copied.structured_content is not None
    assert copied.structured_content["accepted"] is False
    fresh = server.call("vet", artifact="print('a line no retrieval showed')\n")
    assert fresh.structured_content is not None
    checked = fresh.structured_content["checked_blocks"]
    assert fresh.structured_content == {"accepted": True, "reasons": [], "checked_blocks": checked}
    assert text_of(fresh) == f"accepted: checked against {checked} retrieved blocks"
    assert checked >= len(result.structured_content["references"])


def test_index_reports_the_counts(server: Server) -> None:
    result = server.call("index")
    assert result.structured_content is not None
    counts = {k: result.structured_content[k] for k in ("root", "files", "parsed", "removed")}
    assert counts == {"root": str(server.repo), "files": 6, "parsed": 0, "removed": 0}
    assert result.structured_content["languages"] == {"python": 6}
    assert result.structured_content["failures"] == []
    nodes, edges = result.structured_content["nodes"], result.structured_content["edges"]
    assert text_of(result).startswith("indexed 6 files in ")
    assert text_of(result).endswith(
        f" s: 0 parsed, 6 unchanged, 0 removed; {nodes} nodes, {edges} edges, "
        "0 not parsed in full"
    )


def test_plugins_lists_every_installed_plugin(server: Server) -> None:
    result = server.call("plugins")
    assert result.structured_content is not None
    listed = result.structured_content["plugins"]
    assert [p["name"] for p in listed] == INSTALLED_PLUGINS
    assert all(p["enabled"] for p in listed)
    assert json.loads(text_of(result)) == listed


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited before it listened"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port} within 30 s")


def index_lock(repo: Path, cache: Path) -> Path:
    """The writer lock file of the index a server with this cache keeps for ``repo``."""
    index = CodeIndex.location(repo).relative_to(CodeIndex.location(repo).parents[1])
    return cache / "ctx04" / index.parent / (index.name + ".lock")


def index_lock_is_free(repo: Path, cache: Path) -> bool:
    """Whether another process could take the index's writer lock right now."""
    with index_lock(repo, cache).open("rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def test_streamable_http_serves_the_same_slice_and_stops_on_sigterm(
    server: Server, tmp_path: Path
) -> None:
    port = free_port()
    process = subprocess.Popen(
        [CTX04, "mcp", "--repo", str(server.repo), "--http", f"127.0.0.1:{port}"],
        env=server_env(tmp_path / "cache"), stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, process)

        async def over_http() -> tuple[list[str], CallToolResult]:
            url = f"http://127.0.0.1:{port}/mcp"
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = [tool.name for tool in (await session.list_tools()).tools]
                return tools, await session.call_tool("retrieve", {"task": TASK})

        tools, result = anyio.run(over_http)
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=30)
    assert tools == ["retrieve", "vet", "index", "plugins"]
    assert text_of(result) == text_of(server.call("retrieve", task=TASK))
    assert returncode == 0
    assert index_lock_is_free(server.repo, tmp_path / "cache")


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.mark.parametrize("stop", ["stdin closed", "SIGTERM during a retrieve"])
def test_the_server_exits_cleanly_and_leaves_no_lock(stop: str, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "shop", SHOP).resolve()
    cache = tmp_path / "cache"
    process = subprocess.Popen(
        [CTX04, "mcp", "--repo", str(repo)], env=server_env(cache),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "retrieve", "arguments": {"task": TASK}}}
    for message in (INITIALIZE, INITIALIZED, call):
        process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    if stop == "stdin closed":
        assert json.loads(process.stdout.readline())["id"] == 1
        assert json.loads(process.stdout.readline())["id"] == 2
        process.stdin.close()
    else:
        # The first retrieve builds the index: SIGTERM arrives once it has begun.
        assert json.loads(process.stdout.readline())["id"] == 1
        deadline = time.monotonic() + 30
        while not index_lock(repo, cache).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert process.stderr is not None
    assert process.stderr.read() == b""
    assert index_lock_is_free(repo, cache)
    # The next process opens the index as usual.
    cli_env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run([CTX04, "index", "--repo", str(repo)], capture_output=True, text=True,
                          env=cli_env, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("indexed 6 files in ")
