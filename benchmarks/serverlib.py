"""A ``ctx04 mcp`` server driven by the MCP SDK's own client, for the benchmarks.

The server runs as a child process over stdio, as an agent starts it; its
CPU time and memory are read from ``/proc`` by its process id.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import benchlib as bl
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Server:
    portal: BlockingPortal
    session: ClientSession
    pid: int

    def retrieve(self, task: str, repo: Path | None = None) -> str:
        """The slice text of a ``retrieve`` call; a tool error stops the benchmark."""
        arguments: dict[str, object] = {"task": task}
        if repo is not None:
            arguments["repo"] = str(repo)
        result = self.portal.call(self.session.call_tool, "retrieve", arguments)
        [content] = result.content
        assert isinstance(content, TextContent)
        if result.is_error:
            raise SystemExit(f"ctx04 mcp: {content.text}")
        return content.text

    def cpu_seconds(self) -> float:
        """User + system time of the server and of the children it reaped (rg, git)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICK

    def memory(self) -> tuple[int, int]:
        """The server's resident set size now and its peak, in bytes."""
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{self.pid}/status").read_text().splitlines()
        )
        return _kib(status["VmRSS"]), _kib(status["VmHWM"])


def _kib(value: str) -> int:
    return int(value.split()[0]) * 1024


def _server_pid() -> int:
    """The ``ctx04 mcp`` child of this process (the SDK does not say which it spawned)."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"mcp" in command:
            return int(entry.name)
    raise SystemExit("cannot find the ctx04 mcp process")


@asynccontextmanager
async def _session(args: Sequence[str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=bl.tool_path("ctx04"), args=["mcp", *args], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextmanager
def running(repos: Sequence[Path], index_dir: Path | None = None) -> Iterator[Server]:
    """``ctx04 mcp --repo R...`` [``--index-dir I``], connected and initialised."""
    args = [a for repo in repos for a in ("--repo", str(repo))]
    if index_dir is not None:
        args += ["--index-dir", str(index_dir)]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(args)) as session,
    ):
        yield Server(portal, session, _server_pid())


def sample(server: Server, task: str, runs: int, warmup: int = 1) -> bl.Stats:
    """Wall time of ``retrieve`` through the client, and the server's CPU time."""
    for _ in range(warmup):
        server.retrieve(task)
    times, cpu = [], []
    for _ in range(runs):
        cpu_started, started = server.cpu_seconds(), time.perf_counter()
        server.retrieve(task)
        times.append(time.perf_counter() - started)
        cpu.append(server.cpu_seconds() - cpu_started)
    return bl.Stats(tuple(times), tuple(cpu))
