"""A stand-in model: a real chat-completions HTTP server on 127.0.0.1, answering from a script.

Each request takes the next reply of the script; a request past its end is
answered 503 and counted, so a test sees an unexpected call. Every request
is recorded (path, headers, body) for the test to search. Bounded: at most
MAX_REQUESTS requests a session, and a reply that hangs waits HANG_S at most.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_REQUESTS = 200
HANG_S = 2.0  # past any deadline a test sets (0.5 s), short enough to end the session
ARTIFACT = "stand-in-1"  # the model the server says answered
PROMPT_TOKENS = 321
COMPLETION_TOKENS = 45


@dataclass(frozen=True)
class Reply:
    """One scripted reply: a message content (text, or made from the request's
    options), a typed refusal, an HTTP status, a hang, a huge body, or a raw
    body that is not a chat completion at all."""

    content: str | Callable[[list[str]], str] = ""
    raw: bytes = b""
    refusal: str | None = None
    status: int = 200
    hang: bool = False
    huge_bytes: int = 0


def ranking(*options: str, **extra: Any) -> Reply:
    return Reply(json.dumps({"ranking": list(options), **extra}))


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data

    @property
    def asked(self) -> dict[str, Any]:
        """The user message: question set, question, task and options."""
        data: dict[str, Any] = json.loads(self.json["messages"][1]["content"])
        return data


@dataclass
class StandIn:
    url: str
    script: list[Reply] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    unscripted: int = 0
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, *script: Reply) -> None:
        with self.lock:
            self.script = list(script)
            self.requests = []
            self.unscripted = 0

    def next_reply(self, request: Request) -> Reply | None:
        with self.lock:
            self.served += 1
            if self.served > MAX_REQUESTS:
                raise RuntimeError(f"the stand-in model served more than {MAX_REQUESTS} requests")
            self.requests.append(request)
            if not self.script:
                self.unscripted += 1
                return None
            return self.script.pop(0)


def options_of(request: Request) -> list[str]:
    """The offered options, without the question set's own none."""
    return [o["option"] for o in request.asked["options"] if "meaning" not in o]


def completion(content: str, refusal: str | None) -> bytes:
    return json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "model": ARTIFACT,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
                  "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS},
    }).encode()


def start() -> tuple[StandIn, ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    stand_in = StandIn(f"http://127.0.0.1:{server.server_address[1]}/v1")
    server.stand_in = stand_in  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return stand_in, server


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        stand_in: StandIn = self.server.stand_in  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = Request(self.path, dict(self.headers.items()), body)
        reply = stand_in.next_reply(request)
        # The client may give up first, as it should (a hang, a huge body).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer(reply, request)

    def _answer(self, reply: Reply | None, request: Request) -> None:
        if reply is None or reply.status != 200:
            self._send(503 if reply is None else reply.status, b'{"error": "scripted"}')
            return
        if reply.hang:
            time.sleep(HANG_S)
        if reply.huge_bytes:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(reply.huge_bytes))
            self.end_headers()
            chunk = b" " * 65536
            for _ in range(reply.huge_bytes // len(chunk)):
                self.wfile.write(chunk)
            return
        if reply.raw:
            self._send(200, reply.raw)
            return
        content = reply.content
        text = content(options_of(request)) if callable(content) else content
        self._send(200, completion(text, reply.refusal))

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
