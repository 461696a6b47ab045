"""The query model (plugins/query_model) against the stand-in model (tests/model_server.py):
real HTTP on 127.0.0.1, real git repositories, real indexes.

A model describes the functions the task's change will call or touch; the
descriptions reach the API-description recall as extra queries, and what only
they find carries the provenance ``model-query``. Without a model, without the
user's grant to send the task to a hosted one, or on any failure, the
deterministic query stands. The decision door is disabled here: it asks the
same model, and tests/test_door.py covers it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import ctx04_query_model
import pytest
from conftest import make_git_repo
from ctx04_query_model.question import DESCRIPTIONS
from model_server import Reply, StandIn

from ctx04_core.config import ConfigError, configured
from ctx04_core.output import retrieval_json
from ctx04_core.pipeline import Retrieval, retrieve
from ctx04_core.settings import Settings
from ctx04_core.trace import trace_record
from ctx04_core.types import Description, Diagnostic

FILES: dict[str, str | bytes] = {
    "shop/__init__.py": "",
    "shop/cart.py": (
        "class Cart:\n"
        '    """A shopping cart."""\n'
        "\n"
        "    def __init__(self, lines):\n"
        "        self.lines = lines\n"
        "\n"
        "    def total(self):\n"
        '        """The sum of the line prices."""\n'
        "        return sum(self.lines)\n"
    ),
    # No word of the task is in it, its docstring or its name: only a
    # description of what it does finds it.
    "shop/money.py": (
        "def round_half_even(amount):\n"
        '    """Round an amount of money to whole cents, ties to the even cent."""\n'
        "    return amount\n"
    ),
}
TASK = "Cart.total is wrong for some carts"
ROUND = "Round an amount of money to whole cents."
SUM = "Sum the prices of a cart's lines."
ANSWER = json.dumps({"descriptions": [ROUND, SUM]})
# What the deterministic query finds, ranked, with provenance.
DETERMINISTIC = [
    ("shop.cart.Cart", ("apidesc", "bm25", "ripgrep")),
    ("shop.cart.Cart.total", ("apidesc", "bm25", "members", "ripgrep")),
    ("shop.cart.Cart.__init__", ("callgraph", "members")),
]
COVERAGE = "Coverage: nothing cut or refused; recall is not exhaustive.\n"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "shop", FILES)


def asking(stand_in: StandIn, **overrides: Any) -> Settings:
    """A local model at the stand-in: it may see the task."""
    settings = Settings(model_url=stand_in.url, model="stand-in", model_locality="local")
    return settings.with_overrides(**overrides)


def run(repo: Path, settings: Settings, task: str = TASK) -> Retrieval:
    return retrieve(task, repo, settings=settings, disable=["door"])


def deterministic(repo: Path) -> Retrieval:
    return retrieve(TASK, repo, disable=["door", "query_model"])


def found(result: Retrieval) -> list[tuple[str | None, tuple[str, ...]]]:
    return [(r.candidate.qualname, r.candidate.sources) for r in result.candidates]


def test_no_model_configured_asks_nothing_and_changes_nothing(model: StandIn, shop: Path) -> None:
    """Nothing in the default retrieval changes: with no model the slice, the
    candidates and the trace are byte for byte those without the plugin; a hosted
    model the user did not allow to see the task is not asked either."""
    without = deterministic(shop)
    unconfigured = run(shop, Settings())
    assert json.dumps(trace_record(unconfigured)) == json.dumps(trace_record(without))
    assert unconfigured.context.text == without.context.text
    assert unconfigured.candidates == without.candidates
    assert unconfigured.query == without.query
    assert unconfigured.query.descriptions == ()
    assert "descriptions" not in retrieval_json(unconfigured)["query"]
    assert found(without) == DETERMINISTIC
    hosted = run(shop, asking(model, model_locality="hosted"))
    assert model.requests == []
    assert (hosted.context.text, hosted.candidates, hosted.query, hosted.diagnostics) == (
        without.context.text, without.candidates, without.query, without.diagnostics
    )


@pytest.mark.parametrize("grant", [
    {"model_locality": "local"},
    {"model_locality": "hosted", "hosted_model_sees_task": True},
], ids=["local", "hosted with the user's grant"])
def test_the_descriptions_reach_the_description_index(
    model: StandIn, shop: Path, grant: dict[str, Any]
) -> None:
    """The model is sent the task alone and asked for a bounded JSON list; each
    description is searched against the index's descriptions, and a definition
    that only a description finds is a candidate of provenance model-query."""
    model.reset(Reply(ANSWER))
    result = run(shop, asking(model, **grant))
    [request] = model.requests
    sent = request.json
    assert request.path == "/v1/chat/completions"
    assert (sent["model"], sent["temperature"], sent["max_tokens"]) == ("stand-in", 0, 1024)
    assert sent["messages"] == [
        {"role": "system", "content": DESCRIPTIONS.system},
        {"role": "user", "content": json.dumps({
            "question_set": "ctx04.query-descriptions.v1",
            "question": (
                "Which functions will the change call or touch? Describe at most 8 of them, "
                "most important first, each in one plain sentence of at most 200 characters "
                "saying what it does: no code, no file paths. Answer with the JSON object "
                'only: {"descriptions": ["...", "..."]}.'
            ),
            "task": TASK,
        })},
    ]
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "query_descriptions", "strict": True, "schema": {
            "type": "object", "additionalProperties": False, "required": ["descriptions"],
            "properties": {"descriptions": {
                "type": "array", "items": {"type": "string"}, "maxItems": 8,
            }},
        },
    }}
    assert result.query.descriptions == (
        Description(ROUND, "model-query"), Description(SUM, "model-query"),
    )
    assert found(result) == [
        ("shop.cart.Cart", ("apidesc", "bm25", "model-query", "ripgrep")),
        ("shop.cart.Cart.total", ("apidesc", "bm25", "members", "model-query", "ripgrep")),
        ("shop.cart.Cart.__init__", ("callgraph", "members", "model-query")),
        ("shop.money.round_half_even", ("model-query",)),
    ]
    assert result.diagnostics == ()
    data = retrieval_json(result)
    assert data["query"]["descriptions"] == [
        {"text": ROUND, "source": "model-query"}, {"text": SUM, "source": "model-query"},
    ]
    assert (data["candidates"][3]["qualname"], data["candidates"][3]["sources"]) == (
        "shop.money.round_half_even", ["model-query"]
    )
    assert trace_record(result)["query"]["descriptions"] == data["query"]["descriptions"]


HANG = Reply(ANSWER, hang=True)
FAILURES = [
    ("HTTP error", Reply(status=500), "status: the model server answered HTTP 500"),
    ("timeout", HANG, "timeout: no complete answer within 0.5 s"),
    ("huge body", Reply(huge_bytes=4 * 1024 * 1024),
     "too_large: the response is larger than 262144 bytes"),
    ("not chat completions", Reply(raw=b'{"answer": 1}'),
     "malformed: not a chat-completions response: 'choices'"),
    ("typed refusal", Reply(refusal="I cannot help with that."),
     "the model refused: I cannot help with that."),
    ("malformed JSON", Reply('{"descriptions": ["round'),
     "the answer is not JSON: Unterminated string starting at: line 1 column 19 (char 18)"),
    ("not strings", Reply(json.dumps({"descriptions": [ROUND, ["cart", "lines"]]})),
     "the answer has no descriptions: a list of strings"),
    ("a bare list", Reply(json.dumps([ROUND])),
     "the answer has no descriptions: a list of strings"),
]


@pytest.mark.parametrize(("reply", "reason"), [f[1:] for f in FAILURES],
                         ids=[f[0] for f in FAILURES])
def test_a_failed_call_leaves_the_deterministic_query(
    model: StandIn, shop: Path, reply: Reply, reason: str
) -> None:
    """An HTTP error, a timeout (the query's own deadline, under the client's),
    an oversized or malformed answer, a refusal: the query, the candidates and
    every excerpt are the no-model run's, and one unavailable diagnostic says why
    (so the slice's closing coverage line names it). Nothing is stored."""
    baseline = deterministic(shop)
    model.reset(reply)
    result = run(shop, asking(model, model_query_timeout_s=0.5))
    assert len(model.requests) == 1
    assert result.query == baseline.query
    assert result.candidates == baseline.candidates
    assert [(e.text, e.included) for e in result.context.entries] == [
        (e.text, e.included) for e in baseline.context.entries
    ]
    assert result.diagnostics == (Diagnostic("unavailable", "model query", detail=reason),)
    assert baseline.context.text.endswith(COVERAGE)
    item = f"model query: {reason}"
    item = item if len(item) <= 60 else item[:59] + "…"  # the closing line's cut
    assert result.context.text == baseline.context.text.removesuffix(COVERAGE) + (
        f"Coverage: unavailable 1 ({item}); recall is not exhaustive.\n"
    )
    model.reset(Reply(ANSWER))
    asked = run(shop, asking(model))
    assert len(model.requests) == 1
    assert asked.query.descriptions == (
        Description(ROUND, "model-query"), Description(SUM, "model-query"),
    )


def test_the_answer_is_bounded(model: StandIn, shop: Path) -> None:
    """Whitespace folded, repeats and empty ones dropped, each description cut to
    max_description_chars, at most max_query_descriptions: the cuts are omitted
    diagnostics."""
    model.reset(Reply(json.dumps({"descriptions": [
        f"  {ROUND[:15]}\n\t{ROUND[16:]} ", ROUND.upper(), " ", "x" * 250,
        *(f"helper number {i}" for i in range(8)),
    ]})))
    result = run(shop, asking(model))
    assert result.query.descriptions == tuple(
        Description(text, "model-query")
        for text in (ROUND, "x" * 200, *(f"helper number {i}" for i in range(6)))
    )
    assert result.diagnostics == (
        Diagnostic("omitted", "description budget",
                   detail="1 descriptions cut to max_description_chars (200)"),
        Diagnostic("omitted", "description budget",
                   detail="2 descriptions past max_query_descriptions (8) not searched"),
    )
    assert ("shop.money.round_half_even", ("model-query",)) in found(result)


def test_an_answer_is_reused_only_while_every_identity_matches(
    model: StandIn, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored in the index database: the same task asks nothing again, whatever
    the repository's files do; another model, task, budget or wording asks again."""
    model.reset(*(Reply(ANSWER) for _ in range(5)))
    first = run(shop, asking(model))
    again = run(shop, asking(model))
    assert len(model.requests) == 1
    assert (again.query, again.candidates) == (first.query, first.candidates)
    money = shop / "shop/money.py"
    money.write_text(money.read_text().replace("amount", "value"))
    changed = run(shop, asking(model))
    assert len(model.requests) == 1
    assert changed.query.descriptions == first.query.descriptions
    run(shop, asking(model, model="stand-in-2"))
    assert len(model.requests) == 2
    run(shop, asking(model), task=TASK + " twice")
    assert len(model.requests) == 3
    run(shop, asking(model, max_query_descriptions=4))
    assert len(model.requests) == 4
    assert "at most 4 of them" in model.requests[-1].asked["question"]
    monkeypatch.setattr(ctx04_query_model, "DESCRIPTIONS", DESCRIPTIONS.__class__(
        DESCRIPTIONS.name, DESCRIPTIONS.system, DESCRIPTIONS.question + " Be brief."
    ))
    run(shop, asking(model))
    assert len(model.requests) == 5
    assert model.requests[-1].asked["question"].endswith(" Be brief.")
    assert model.unscripted == 0


def test_a_repository_cannot_grant_a_hosted_model_the_task(
    shop: Path, tmp_path: Path
) -> None:
    """hosted_model_sees_task decides what leaves the machine: a repository's own
    file may not set it; the user's file may."""
    (shop / "ctx04.toml").write_text("hosted_model_sees_task = true\n")
    with pytest.raises(ConfigError, match=(
        r"ctx04\.toml: hosted_model_sees_task cannot be set by a repository's own file"
    )):
        configured(shop)
    (shop / "ctx04.toml").unlink()
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "ctx04" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("hosted_model_sees_task = true\n")
    assert configured(shop).settings.hosted_model_sees_task is True
    assert Settings().hosted_model_sees_task is False


CTX04 = str(Path(sys.executable).parent / "ctx04")


def test_cli_json_shows_the_descriptions_and_their_provenance(
    model: StandIn, shop: Path
) -> None:
    """`ctx04 retrieve --format json` with a model from the environment: a hosted
    one is asked only with the grant (--set hosted_model_sees_task=true); a local
    one of the same name and URL is answered from the stored answer."""
    model.reset(Reply(ANSWER))
    env = {**os.environ, "CTX04_MODEL_URL": model.url, "CTX04_MODEL": "stand-in"}

    def ctx04(*args: str, **more: str) -> dict[str, Any]:
        done = subprocess.run(
            [CTX04, "retrieve", TASK, "--repo", str(shop), "--format", "json",
             "--disable", "door", *args],
            capture_output=True, text=True, check=False, env={**env, **more},
        )
        assert (done.returncode, done.stderr) == (0, "")
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    hosted = ctx04()
    assert model.requests == []
    assert "descriptions" not in hosted["query"]
    granted = ctx04("--set", "hosted_model_sees_task=true")
    assert len(model.requests) == 1
    assert granted["query"]["descriptions"] == [
        {"text": ROUND, "source": "model-query"}, {"text": SUM, "source": "model-query"},
    ]
    assert [(c["qualname"], c["sources"]) for c in granted["candidates"]][-1] == (
        "shop.money.round_half_even", ["model-query"]
    )
    # A local model of the same name and URL: the stored answer, nothing asked.
    local = ctx04(CTX04_MODEL_LOCALITY="local")
    assert len(model.requests) == 1
    assert local["query"] == granted["query"]
