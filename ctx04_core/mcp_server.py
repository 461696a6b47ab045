"""``ctx04 mcp``: ctx04 as a Model Context Protocol server that stays warm.

Built on the official Python SDK (``mcp``). Four tools: ``retrieve``,
``vet``, ``index`` and ``plugins``. The plugin managers, the tokenizer and
each repository's open index live as long as the server
(:mod:`ctx04_core.warm`); every call still sees the files as they are on disk
when it runs. A failing call returns a tool error with a one-line message and
the server goes on serving.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import unquote, urlparse

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from pydantic import Field, ValidationError

from ctx04_core.config import command_line, configured
from ctx04_core.index import IndexUnavailable, RefreshStats
from ctx04_core.pipeline import TaskError
from ctx04_core.plugins import PluginError, describe_plugins, require_recall
from ctx04_core.repository import RepoError, resolve_root
from ctx04_core.ripgrep import RipgrepMissing
from ctx04_core.types import Evidence
from ctx04_core.warm import WarmState

log = logging.getLogger(__name__)

# Errors whose message tells the caller what to fix; anything else is a bug
# or a plugin's failure, reported with its type.
USER_ERRORS = (RepoError, TaskError, PluginError, IndexUnavailable, RipgrepMissing, ValueError)

T = TypeVar("T")

# glibc's mallopt parameter for the most malloc arenas a process may have.
M_ARENA_MAX = -8
# How long a SIGTERM or SIGINT waits for the work under way (a cold refresh of a
# large repository takes minutes) before the server leaves anyway.
SHUTDOWN_GRACE_S = 5.0

INSTRUCTIONS = (
    "ctx04 finds the few lines of code a task needs in a repository. Call `retrieve` with "
    "the task (issue text, bug report, request) before reading or editing code: it returns "
    "a ranked slice of excerpts, each with its path, lines and content digest. Call `vet` "
    "with a patch or command you are about to apply to check it does not copy retrieved "
    "code verbatim."
)


class Session:
    """What the server keeps between calls: warm state, allowed roots, the evidence shown."""

    def __init__(
        self, repos: list[Path], index_dir: Path | None, trace: Path | None, timeout_s: float
    ) -> None:
        self.repos = repos  # --repo folders, resolved; the first is the default
        self.trace = trace
        self.timeout_s = timeout_s
        # --index-dir holds one index: the default repository's.
        self.warm = WarmState({repos[0]: index_dir} if repos and index_dir else {})
        self._evidence: list[Evidence] = []
        self._evidence_lock = threading.Lock()

    async def root_for(self, repo: str | None, ctx: Context) -> Path:
        """The repository a call names (or the default), refused outside the allowed roots."""
        allowed = await self.allowed_roots(ctx)
        if repo is None:
            return allowed[0]
        root = resolve_root(repo)
        if not _inside(root, allowed):
            shown = ", ".join(str(a) for a in allowed)
            raise RepoError(f"repository {repo} is outside the allowed roots ({shown})")
        return root

    async def allowed_roots(self, ctx: Context) -> list[Path]:
        """The folders a call may read, the default first.

        The client's roots stand in for a missing --repo; beside --repo they
        only narrow it, to the folders inside both: a client that lists
        file:/// must not open the whole disk to a server given one repository.
        Roots with nothing in common with --repo are the client's other work
        (a user-wide configuration opened on another project): --repo stands.
        """
        client = await _client_roots(ctx)
        if not self.repos:
            return client or [Path.cwd().resolve()]
        if not client:
            return self.repos
        allowed = list(dict.fromkeys(
            common
            for repo in self.repos
            for root in client
            if (common := _common_folder(repo, root)) is not None
        ))
        return allowed or self.repos

    def remember(self, evidence: tuple[Evidence, ...]) -> None:
        with self._evidence_lock:
            self._evidence.extend(evidence)

    def evidence(self) -> tuple[Evidence, ...]:
        with self._evidence_lock:
            return tuple(self._evidence)


def _inside(path: Path, allowed: list[Path]) -> bool:
    resolved = path.expanduser().resolve()
    return any(resolved.is_relative_to(root) for root in allowed)


def _common_folder(a: Path, b: Path) -> Path | None:
    """The folder whose files are inside both ``a`` and ``b``: the deeper one, if nested."""
    if a.is_relative_to(b):
        return a
    if b.is_relative_to(a):
        return b
    return None


async def _client_roots(ctx: Context) -> list[Path]:
    """The client's file roots, when it offers them."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.roots is None:
        return []
    listed = await ctx.session.list_roots()
    return [
        Path(unquote(urlparse(str(root.uri)).path)).resolve()
        for root in listed.roots
        if str(root.uri).startswith("file://")
    ]


async def _on_repository_thread(session: Session, root: Path, work: Callable[[], T]) -> T:
    """Run ``work`` on the repository's own thread, within the session's timeout."""
    future = session.warm.repository(root).submit(work)
    try:
        with anyio.fail_after(session.timeout_s):
            return await asyncio.wrap_future(future)
    except TimeoutError:
        raise ToolError(
            f"no answer within {session.timeout_s:g} s; the work goes on and later calls on "
            f"{root} wait for it"
        ) from None


def _tool_error(err: Exception) -> ToolError:
    """The error a client sees: one line, the cause's own words for a user's mistake."""
    message = " ".join(str(err).split())
    if isinstance(err, USER_ERRORS):
        return ToolError(message)
    log.error("ctx04 mcp: unexpected failure", exc_info=err)
    return ToolError(f"{type(err).__name__}: {message}" if message else type(err).__name__)


def build_server(session: Session) -> MCPServer[Any]:
    from importlib.metadata import version

    from ctx04_core.output import retrieval_json
    from ctx04_core.trace import append_trace
    from ctx04_core.vetting import vet as judge

    server: MCPServer[Any] = MCPServer(
        "ctx04", instructions=INSTRUCTIONS, version=version("ctx04"), log_level="WARNING"
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def retrieve(
        task: Annotated[str, Field(description="The task: an issue, a request, a bug report.")],
        ctx: Context,
        repo: Annotated[
            str | None,
            Field(description="The repository folder; default: the server's --repo."),
        ] = None,
        test: Annotated[
            str | None,
            Field(description="The failing test's node id, e.g. tests/test_x.py::test_y."),
        ] = None,
        error: Annotated[
            str | None, Field(description="The latest error output or traceback, as text.")
        ] = None,
        budget_tokens: Annotated[
            int | None, Field(ge=1, description="Token budget of the slice (default 4000).")
        ] = None,
        disable: Annotated[
            list[str] | None,
            Field(description="Plugins to disable for this call, by name (see `plugins`)."),
        ] = None,
        profile: Annotated[
            Literal["default", "compact"],
            Field(description="compact: smaller budgets (4 terms, 8 paths, 10 lines, 2 KiB)."),
        ] = "default",
    ) -> CallToolResult:
        """Find the code a task needs: call this first, before reading or editing files.

        Returns the context slice as text (ranked excerpts, each headed by its
        path, lines and content digest, what a model should read) and, as
        structured content, the full ctx04.context-slice.v1 result: every
        ranked candidate with its score and signals, the source references,
        and coverage diagnostics (what was cut, refused or unavailable).
        Every call sees the repository's files as they are now.
        """
        try:
            root = await session.root_for(repo, ctx)
            task_text = task if task.strip() or not error else error
            # The repository's file is read on every call, so an edit to it
            # applies from the next call on, as an edit to the code does.
            layered = configured(
                root, command_line(budget_tokens, profile == "compact"), disable or ()
            )
            settings = layered.settings
            warm = session.warm.repository(root)
            pm = session.warm.plugin_manager(layered.disable)
            require_recall(pm)

            def work() -> CallToolResult:
                result = warm.retrieve(
                    pm, task_text, latest_error=error, test=test, settings=settings
                )
                session.remember(tuple(e.evidence for e in result.context.entries if e.included))
                if session.trace is not None:
                    append_trace(result, session.trace)
                return CallToolResult(
                    content=[TextContent(type="text", text=result.context.text)],
                    structured_content=retrieval_json(result),
                )

            return await _on_repository_thread(session, root, work)
        except ToolError:
            raise
        except Exception as err:
            raise _tool_error(err) from err

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def vet(
        artifact: Annotated[
            str, Field(description="What the model produced: a patch, an edit, a command.")
        ],
    ) -> CallToolResult:
        """Check an artifact before applying it: is it a verbatim copy of retrieved code?

        Judged against every block `retrieve` returned in this server's
        lifetime (retrieved code is untrusted data, never a template).
        Returns accepted, or the rejection reasons.
        """
        evidence = session.evidence()
        pm = session.warm.plugin_manager()
        try:
            # A thread cannot be stopped: past the timeout the check is left
            # to finish on its own, its work bounded by vet_max_artifact_bytes
            # times the blocks remembered, and its verdict dropped.
            with anyio.fail_after(session.timeout_s):
                verdict = await anyio.to_thread.run_sync(
                    lambda: judge(artifact, evidence, plugins=pm), abandon_on_cancel=True
                )
        except TimeoutError:
            raise ToolError(
                f"no answer within {session.timeout_s:g} s; the artifact is not vetted"
            ) from None
        except Exception as err:
            raise _tool_error(err) from err
        if verdict.accepted:
            text = f"accepted: checked against {len(evidence)} retrieved blocks"
        else:
            text = "\n".join(f"rejected: {reason}" for reason in verdict.reasons)
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content={
                "accepted": verdict.accepted, "reasons": list(verdict.reasons),
                "checked_blocks": len(evidence),
            },
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def index(
        ctx: Context,
        repo: Annotated[
            str | None,
            Field(description="The repository folder; default: the server's --repo."),
        ] = None,
    ) -> CallToolResult:
        """Build or refresh a repository's code index now and report its counts.

        `retrieve` keeps the index current by itself; call this to warm a
        large repository up before the first question, or to see what was
        indexed and what could not be parsed.
        """
        try:
            root = await session.root_for(repo, ctx)
            warm = session.warm.repository(root)
            layered = configured(root)
            pm = session.warm.plugin_manager(layered.disable)

            def work() -> RefreshStats:
                return warm.opened(pm, layered.settings, force=True)[1]

            stats = await _on_repository_thread(session, root, work)
        except ToolError:
            raise
        except Exception as err:
            raise _tool_error(err) from err
        return CallToolResult(
            content=[TextContent(type="text", text=stats.summary())],
            structured_content={
                "root": str(root), "files": stats.files, "parsed": stats.parsed,
                "unchanged": stats.unchanged, "removed": stats.removed, "nodes": stats.nodes,
                "edges": stats.edges,
                "failures": [
                    {"path": p, "status": s, "message": m} for p, s, m in stats.failures
                ],
                "languages": dict(stats.languages), "seconds": round(stats.seconds, 3),
                "recovered": stats.recovered,
            },
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def plugins() -> CallToolResult:
        """List the installed ctx04 plugins: name, hooks, distribution, version, enabled.

        A name here is what `retrieve`'s `disable` takes.
        """
        try:
            infos = describe_plugins(session.warm.plugin_manager())
        except Exception as err:
            raise _tool_error(err) from err
        listed = [asdict(info) for info in infos]
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(listed, indent=2))],
            structured_content={"plugins": listed},
        )

    return server


def one_malloc_arena() -> None:
    """Make glibc's malloc serve every thread from one arena (elsewhere: nothing).

    Each repository's work runs on a thread of its own, and glibc gives each
    thread an arena that keeps the free memory of that thread's largest
    retrieval: over four repositories the server held about 180 MiB of free
    heap and its RSS kept rising with each new task (docs/benchmarks.md, "MCP
    server"). The threads take turns on the GIL, so one arena costs no speed.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_ARENA_MAX, 1)


# The JSON-RPC errors of a line that is not JSON, and of one that is JSON but no message.
NOT_JSON = "Parse error: not JSON"
NOT_A_MESSAGE = "Invalid request: not a JSON-RPC message"


class RereadStdin:
    """The stdio transport's incoming messages, each line its parser refused read again.

    The SDK parses a line with pydantic's JSON parser, which refuses a lone
    surrogate escape (``"bad \\ud800 text"``, what a JavaScript client sends
    for a broken string) though JSON allows one, and then drops the line: the
    client waits for its answer forever. Python's ``json`` reads such a line,
    and the call is served (its task escaped and reported, as the CLI's is).
    A line that is still not a message is answered with a JSON-RPC error: the
    request's id when it has one, ``null`` when it is not JSON.
    """

    def __init__(self, messages: Any, replies: Any) -> None:
        self._messages = messages  # the SDK's read stream
        self._replies = replies  # the SDK's write stream

    @property
    def last_context(self) -> Any:
        """The sender's context, which the SDK's dispatcher reads off its stream."""
        return getattr(self._messages, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self._messages.receive()
            if not isinstance(item, ValidationError):
                return item
            message = await self._reread(item)
            if message is not None:
                return message

    async def _reread(self, refused: ValidationError) -> SessionMessage | None:
        """The message of a refused line, or None once the line's error is sent."""
        line = next(
            (e["input"] for e in refused.errors() if e["type"] == "json_invalid"), None
        )
        if not isinstance(line, str):
            return None  # JSON but no message: the SDK logs and drops it, as before
        try:
            document = json.loads(line)
        except ValueError:
            await self._reply(None, PARSE_ERROR, NOT_JSON)
            return None
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_python(document, by_name=False))
        except ValidationError:
            request_id = document.get("id") if isinstance(document, dict) else None
            if isinstance(request_id, bool) or not isinstance(request_id, int | str):
                request_id = None
            await self._reply(request_id, INVALID_REQUEST, NOT_A_MESSAGE)
            return None

    async def _reply(self, request_id: int | str | None, code: int, message: str) -> None:
        error = JSONRPCError(
            jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message)
        )
        await self._replies.send(SessionMessage(error))

    def __aiter__(self) -> RereadStdin:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._messages.aclose()

    async def __aenter__(self) -> RereadStdin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def run_stdio(server: MCPServer[Any]) -> None:
    """``server.run_stdio_async()``, its incoming lines read by :class:`RereadStdin`."""
    lowlevel = server._lowlevel_server
    async with stdio_server() as (messages, replies):
        await lowlevel.run(
            RereadStdin(messages, replies), replies, lowlevel.create_initialization_options()
        )


def serve(session: Session, http: tuple[str, int] | None) -> None:
    """Serve until stdin closes (stdio), or until SIGTERM or SIGINT; then close cleanly."""
    one_malloc_arena()
    server = build_server(session)

    async def run() -> None:
        async with anyio.create_task_group() as tasks:

            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                    async for _ in received:
                        break
                # The thread reading stdin cannot be interrupted, so the task
                # group would never finish: close what holds state (the work
                # under way, each index), then leave. Work still going after
                # the grace is left to die with the process: its write is
                # rolled back by the next opener, its parse workers die too.
                with anyio.move_on_after(SHUTDOWN_GRACE_S):
                    await anyio.to_thread.run_sync(session.warm.close, abandon_on_cancel=True)
                logging.shutdown()
                os._exit(0)

            tasks.start_soon(stop_on_signal)
            if http is None:
                await run_stdio(server)
            else:
                host, port = http
                await server.run_streamable_http_async(host=host, port=port)
            tasks.cancel_scope.cancel()

    try:
        anyio.run(run)
    finally:
        session.warm.close()
