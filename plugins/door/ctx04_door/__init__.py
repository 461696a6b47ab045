"""ctx04 decision door: a model ranks the observed evidence, seeing records, never content.

When a model is configured (``CTX04_MODEL_URL``, ``CTX04_MODEL``) and the
observation names at least two distinct paths, the door asks the question
set ``ctx04.evidence-relevance.v1`` which candidates the task wants. Any
answer that is not a ranking of offered options (abstention, a typed
refusal, a transport failure, a timeout, malformed output, an option not
offered) leaves the deterministic order standing: the call is returned
with the reason and no selection.

A ranking is kept in the index database and answers again only while every
identity still matches: the task, the evidence digest over the full
candidate records and omissions, the question set's wording digest, the
bound policy's digest and the model asked.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import asdict, replace
from typing import Any

from ctx04_core import model
from ctx04_core.evidence import sha256_hex
from ctx04_core.hookspecs import hookimpl
from ctx04_core.index import CodeIndex
from ctx04_core.repository import Repo
from ctx04_core.selection import distinct_paths
from ctx04_core.settings import MODEL_ENV, MODEL_URL_ENV, Settings
from ctx04_core.types import Decision, DecisionCall, Observation, Observed, Selection
from ctx04_door.bounds import bound, disclosed, policy_digest
from ctx04_door.question import RELEVANCE, Answer, QuestionSet, Unusable, parse_answer

CACHE_NAMESPACE = "door"


@hookimpl
def select(observation: Observation, repo: Repo, settings: Settings) -> Decision:
    return decide(RELEVANCE, observation, repo.index, settings)


def decide(
    question: QuestionSet, observation: Observation, index: CodeIndex, settings: Settings
) -> Decision:
    """Ask ``question`` about the observation, or answer from a stored ranking."""
    if not model.configured(settings):
        return _skipped(question, settings, f"no model configured ({MODEL_URL_ENV}, {MODEL_ENV})")
    if distinct_paths(observation) < 2:
        return _skipped(question, settings, "the evidence names one path: nothing is asked")
    options = [c.option for c in observation.candidates]
    bounds = tuple((c, bound(c, settings.model_locality)) for c in observation.candidates)
    identities = _identities(question, observation, settings)
    key = f"{CACHE_NAMESPACE}:{sha256_hex(json.dumps(identities))}"
    kept = _stored(index, key, options, question)
    if kept is not None:
        answer, artifact = kept
        call = DecisionCall("ranked", "", question.name, settings.model, artifact, cached=True)
        return Decision(call, _selection(answer, options, bounds, observation, identities, call))
    messages = _messages(question, observation.task, bounds)
    try:
        reply = model.chat(messages, settings, ("evidence_relevance", question.schema(options)))
    except model.ModelError as err:
        return Decision(DecisionCall("failed", f"{err.kind}: {err}", question.name, settings.model))
    call = DecisionCall(
        "ranked", "", question.name, settings.model, reply.model, False, reply.prompt_tokens,
        reply.completion_tokens, round(reply.seconds, 3), model.cost_usd(reply, settings),
    )
    if reply.refusal is not None:
        return Decision(_failed(call, "refused", f"the model refused: {reply.refusal[:200]}"))
    try:
        answer = parse_answer(reply.content, options, question)
    except Unusable as err:
        return Decision(_failed(call, "failed", str(err)))
    if answer.ranking == (question.none,):
        return Decision(_failed(call, "abstained", f"the model answered {question.none!r}"))
    # A read-only index: the ranking is asked again next time.
    with contextlib.suppress(sqlite3.Error):
        index.store_derived(
            key, json.dumps({"answer": answer.to_json(), "model_artifact": reply.model}),
            keep=settings.door_cache_entries,
        )
    return Decision(call, _selection(answer, options, bounds, observation, identities, call))


def _stored(
    index: CodeIndex, key: str, options: list[str], question: QuestionSet
) -> tuple[Answer, str] | None:
    """The stored ranking and the model artifact that gave it; None when there is none."""
    stored = index.derived(key)
    if stored is None:
        return None
    # Checked as a fresh answer: a damaged entry is asked again, never trusted.
    try:
        kept = json.loads(stored)
        return parse_answer(json.dumps(kept["answer"]), options, question), str(
            kept["model_artifact"]
        )
    except (Unusable, ValueError, KeyError, TypeError):
        return None


def _identities(
    question: QuestionSet, observation: Observation, settings: Settings
) -> list[tuple[str, str]]:
    """Everything a ranking is attributable to; any change asks again."""
    evidence = {
        "candidates": [asdict(c) for c in observation.candidates],
        "omissions": [asdict(d) for d in observation.omissions],
    }
    return [
        ("task", sha256_hex(observation.task)),
        ("evidence", sha256_hex(json.dumps(evidence, sort_keys=True))),
        ("question_set", question.name),
        ("wording", question.digest),
        ("bound_policy", policy_digest(settings.model_locality)),
        ("model", settings.model),
        ("model_url", settings.model_url),
    ]


def _messages(
    question: QuestionSet, task: str, bounds: tuple[tuple[Observed, str], ...]
) -> list[dict[str, str]]:
    records: list[dict[str, Any]] = [disclosed(c, bound_name) for c, bound_name in bounds]
    records.append({"option": question.none, "meaning": question.none_meaning})
    asked = {"question_set": question.name, "question": question.question,
             "task": task, "options": records}
    return [{"role": "system", "content": question.system},
            {"role": "user", "content": json.dumps(asked, ensure_ascii=False)}]


def _selection(
    answer: Answer, options: list[str], bounds: tuple[tuple[Observed, str], ...],
    observation: Observation, identities: list[tuple[str, str]], call: DecisionCall,
) -> Selection:
    return Selection(
        "ranked", answer.ranking, answer.distribution, answer.any_relevant, answer.coverage,
        tuple(o for o in options if o not in answer.ranking), bounds, observation.omissions,
        (*identities, ("model_artifact", call.model_artifact)),
    )


def _skipped(question: QuestionSet, settings: Settings, reason: str) -> Decision:
    return Decision(DecisionCall("skipped", reason, question.name, settings.model))


def _failed(call: DecisionCall, outcome: str, reason: str) -> DecisionCall:
    return replace(call, outcome=outcome, reason=reason)
