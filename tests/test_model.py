"""The model client (ctx04_core/model.py) against the stand-in server: what a request
carries, where its key comes from, how a call that cannot answer fails."""

from __future__ import annotations

import socket

import pytest
from model_server import ARTIFACT, COMPLETION_TOKENS, PROMPT_TOKENS, StandIn, ranking

from ctx04_core import model as client
from ctx04_core.settings import Settings, SettingsError

MESSAGES = [{"role": "user", "content": "which?"}]
SCHEMA = ("answer", {"type": "object"})


def settings_for(stand_in: StandIn, **overrides: object) -> Settings:
    return Settings(model_url=stand_in.url + "/", model="m-1").with_overrides(**overrides)


def test_a_call_is_bounded_and_deterministic(model: StandIn) -> None:
    model.reset(ranking("c1"))
    reply = client.chat(MESSAGES, settings_for(model, model_max_output_tokens=77), SCHEMA)
    [request] = model.requests
    assert request.path == "/v1/chat/completions"
    assert request.json == {
        "model": "m-1", "messages": MESSAGES, "temperature": 0, "max_tokens": 77,
        "stream": False,
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": {"type": "object"}, "strict": True}},
    }
    assert "authorization" not in {k.lower() for k in request.headers}
    assert (reply.content, reply.refusal, reply.model) == ('{"ranking": ["c1"]}', None, ARTIFACT)
    assert (reply.prompt_tokens, reply.completion_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    priced = settings_for(model, model_usd_per_mtok_input=2.5, model_usd_per_mtok_output=10.0)
    assert client.cost_usd(reply, priced) == (321 * 2.5 + 45 * 10.0) / 1_000_000


def test_structured_output_can_be_turned_off(model: StandIn) -> None:
    model.reset(ranking("c1"))
    client.chat(MESSAGES, settings_for(model, model_structured_output=False), SCHEMA)
    assert "response_format" not in model.requests[0].json


def test_the_key_comes_from_the_variable_the_settings_name(
    model: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTX04_MODEL_API_KEY", "sk-default")
    monkeypatch.setenv("TEAM_LLM_KEY", "sk-team")
    model.reset(ranking("c1"), ranking("c1"))
    client.chat(MESSAGES, settings_for(model))
    client.chat(MESSAGES, settings_for(model, model_api_key_env="TEAM_LLM_KEY"))
    assert [r.headers["Authorization"] for r in model.requests] == [
        "Bearer sk-default", "Bearer sk-team"
    ]
    assert "sk-" not in str(Settings().to_json())


def test_the_environment_points_ctx04_at_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not client.configured(Settings())
    monkeypatch.setenv("CTX04_MODEL_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("CTX04_MODEL", "qwen")
    monkeypatch.setenv("CTX04_MODEL_LOCALITY", "local")
    settings = Settings()
    assert (settings.model_url, settings.model, settings.model_locality) == (
        "http://127.0.0.1:1/v1", "qwen", "local"
    )
    assert client.configured(settings)
    monkeypatch.setenv("CTX04_MODEL_LOCALITY", "nearby")
    with pytest.raises(SettingsError, match=r"model_locality \(CTX04_MODEL_LOCALITY\) is one of "
                       r"hosted, local, not 'nearby'"):
        Settings()


def test_no_server_is_a_transport_failure() -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(model_url=f"http://127.0.0.1:{port}/v1", model="m", model_timeout_s=0.5)
    with pytest.raises(client.ModelError) as failure:
        client.chat(MESSAGES, settings)
    assert failure.value.kind == client.TRANSPORT
