"""The one way ctx04 asks a model: OpenAI-compatible chat completions over HTTP.

Hosted providers and local servers (vLLM, llama.cpp's server, Ollama) all
speak this protocol, so a base URL and a model name are the whole
configuration (``Settings.model_url``, ``Settings.model``, from
``CTX04_MODEL_URL`` and ``CTX04_MODEL``). Every call is bounded: one deadline
for the whole exchange, a cap on the answer's tokens and on the response's
bytes, temperature 0, no retry. A call that yields no usable message raises
:class:`ModelError`, whose ``kind`` says how it failed, so a caller can fall
back and record why.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import httpx

from ctx04_core.settings import Settings

# httpx logs every request at INFO; a plugin that configures logging (the
# meaning plugin's encoder does) would print it among ctx04's own output.
logging.getLogger("httpx").setLevel(logging.WARNING)

# How a call failed, as ModelError.kind.
TIMEOUT = "timeout"
TRANSPORT = "transport"
STATUS = "status"
TOO_LARGE = "too_large"
MALFORMED = "malformed"


class ModelError(Exception):
    """A call that produced no usable message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class ModelReply:
    """The first choice's message and what the call cost."""

    content: str  # the message text; "" when the model refused
    refusal: str | None  # the protocol's typed refusal, when the model gave one
    model: str  # the model artifact the server says answered
    prompt_tokens: int
    completion_tokens: int
    seconds: float


def configured(settings: Settings) -> bool:
    return bool(settings.model_url and settings.model)


# Where the model runs (Settings.model_locality): on the user's own machine or
# network, or at a provider.
LOCAL = "local"


def is_local(locality: str) -> bool:
    """Whether a model of ``locality`` runs where the user's data already is.

    The one test of what a model may be sent beyond what a read admitted: the
    door's bounds send a local model the digests of excerpts a budget cut
    (``ctx04_door.bounds``), and :func:`sees_task` sends it the task text.
    """
    return locality == LOCAL


def sees_task(settings: Settings) -> bool:
    """Whether the configured model may be sent the task text to write query text
    from it: a local one may, a hosted one only when the user says so
    (``hosted_model_sees_task``, which a repository's own file cannot set)."""
    return is_local(settings.model_locality) or settings.hosted_model_sees_task


def chat(
    messages: list[dict[str, str]],
    settings: Settings,
    schema: tuple[str, dict[str, Any]] | None = None,
) -> ModelReply:
    """Ask ``settings.model`` at ``settings.model_url`` for one completion.

    ``schema`` (a name and a JSON schema) asks for structured output when
    ``settings.model_structured_output`` is on; the reply's content is then
    JSON the caller still has to validate, since not every server enforces it.
    """
    body: dict[str, Any] = {
        "model": settings.model, "messages": messages, "temperature": 0,
        "max_tokens": settings.model_max_output_tokens, "stream": False,
    }
    if schema is not None and settings.model_structured_output:
        name, json_schema = schema
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": json_schema, "strict": True},
        }
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(settings.model_api_key_env, "")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    url = settings.model_url.rstrip("/") + "/chat/completions"
    started = time.monotonic()
    raw = _post(url, body, headers, settings, started)
    return _reply(raw, time.monotonic() - started)


def cost_usd(reply: ModelReply, settings: Settings) -> float:
    """The call's price estimate from the settings' per-million-token prices."""
    return (
        reply.prompt_tokens * settings.model_usd_per_mtok_input
        + reply.completion_tokens * settings.model_usd_per_mtok_output
    ) / 1_000_000


def _post(
    url: str, body: dict[str, Any], headers: dict[str, str], settings: Settings, started: float
) -> bytes:
    """The response body, read within the deadline and the byte cap."""
    deadline = settings.model_timeout_s
    limit = settings.model_max_response_bytes
    # httpx's timeout bounds each wait; the loop bounds their sum, so a server
    # that trickles bytes cannot hold the call past the deadline either.
    try:
        with httpx.Client(timeout=deadline, follow_redirects=False) as client, client.stream(
            "POST", url, json=body, headers=headers
        ) as response:
            if response.status_code != 200:
                raise ModelError(STATUS, f"the model server answered HTTP {response.status_code}")
            received = bytearray()
            for chunk in response.iter_bytes():
                received += chunk
                if len(received) > limit:
                    raise ModelError(TOO_LARGE, f"the response is larger than {limit} bytes")
                if time.monotonic() - started > deadline:
                    raise ModelError(TIMEOUT, f"no complete answer within {deadline:g} s")
            return bytes(received)
    except httpx.TimeoutException as err:
        raise ModelError(TIMEOUT, f"no complete answer within {deadline:g} s") from err
    except httpx.HTTPError as err:
        raise ModelError(TRANSPORT, f"the model server could not be reached: {err}") from err


def _reply(raw: bytes, seconds: float) -> ModelReply:
    try:
        data = json.loads(raw)
        message = data["choices"][0]["message"]
        usage = data.get("usage") or {}
        refusal = message.get("refusal")
        content = message.get("content") or ""
        if not isinstance(content, str) or (refusal is not None and not isinstance(refusal, str)):
            raise TypeError("content and refusal are strings")
        return ModelReply(
            content, refusal, str(data.get("model", "")), int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)), seconds,
        )
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
        raise ModelError(MALFORMED, f"not a chat-completions response: {err}") from err
