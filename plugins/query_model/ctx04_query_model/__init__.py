"""ctx04 query model: a model describes the functions the change will call or touch.

AllianceCoder's decomposed query (spec §2 row 11): the task says what is
wrong; the code it needs is found by what that code does. Before recall,
the model is asked the question set ``ctx04.query-descriptions.v1`` for a
short list of descriptions, in the words a docstring would use, of the
functions the change will call or touch. Each becomes a
:class:`~ctx04_core.types.Description` of source ``model-query`` through the
``describe_query`` hook; the ``apidesc`` recall searches it against the
index's descriptions, and what it finds carries ``model-query`` as its
provenance.

Nothing is asked unless a model is configured (``CTX04_MODEL_URL``,
``CTX04_MODEL``) and may see the task text (``ctx04_core.model.sees_task``:
a local model, or a hosted one the user allowed with
``hosted_model_sees_task``). Only the task text is sent: no code, no path of
the repository. A failed call (an HTTP error, a timeout, a refusal, an
answer that is not a list of strings) adds nothing: the deterministic query
stands, and an ``unavailable`` diagnostic (reason ``model query``) says why.
The call gets at most ``model_query_timeout_s``.

An answer is kept in the index database (the newest
``model_query_cache_entries``) and answers again only while every identity
matches: the task, the question set's wording, the budgets it was asked
under, and the model name and URL.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3

from ctx04_core import model
from ctx04_core.evidence import sha256_hex
from ctx04_core.hookspecs import hookimpl
from ctx04_core.index import CodeIndex
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Described, Description, Diagnostic, Query
from ctx04_query_model.question import DESCRIPTIONS, QuestionSet, Unusable, parse_answer

SOURCE = "model-query"  # the provenance of what the descriptions find
CACHE_NAMESPACE = "query_model"
REASON = "model query"  # the reason of the diagnostic of a failed call


@hookimpl
def describe_query(query: Query, repo: Repo, settings: Settings) -> Described | None:
    if not model.configured(settings) or not model.sees_task(settings):
        return None
    return described(DESCRIPTIONS, query.task_text, repo.index, settings)


def described(
    question: QuestionSet, task: str, index: CodeIndex, settings: Settings
) -> Described:
    """Ask ``question`` about ``task``, or answer from a stored answer."""
    count, chars = settings.max_query_descriptions, settings.max_description_chars
    key = f"{CACHE_NAMESPACE}:{sha256_hex(json.dumps(_identities(question, task, settings)))}"
    stored = index.derived(key)
    if stored is not None:
        # Checked as a fresh answer: a damaged entry is asked again, never trusted.
        with contextlib.suppress(Unusable):
            return _described(parse_answer(stored))
    messages = [
        {"role": "system", "content": question.system},
        {"role": "user", "content": json.dumps(
            {"question_set": question.name, "question": question.asked(count, chars),
             "task": task},
            ensure_ascii=False,
        )},
    ]
    # On every retrieval's path: its own deadline, never more than the client's.
    bounded = settings.with_overrides(
        model_timeout_s=min(settings.model_timeout_s, settings.model_query_timeout_s)
    )
    try:
        reply = model.chat(messages, bounded, ("query_descriptions", question.schema(count)))
    except model.ModelError as err:
        return _unavailable(f"{err.kind}: {err}")
    if reply.refusal is not None:
        return _unavailable(f"the model refused: {reply.refusal[:200]}")
    try:
        texts = parse_answer(reply.content)
    except Unusable as err:
        return _unavailable(str(err))
    # A read-only index: the question is asked again next time.
    with contextlib.suppress(sqlite3.Error):
        index.store_derived(
            key, json.dumps({"descriptions": list(texts)}),
            keep=settings.model_query_cache_entries,
        )
    return _described(texts)


def _identities(question: QuestionSet, task: str, settings: Settings) -> list[tuple[str, str]]:
    """Everything an answer is attributable to; any change asks again."""
    return [
        ("task", sha256_hex(task)),
        ("question_set", question.name),
        ("wording", question.digest),
        ("budgets", f"{settings.max_query_descriptions}x{settings.max_description_chars}"),
        ("model", settings.model),
        ("model_url", settings.model_url),
    ]


def _described(texts: tuple[str, ...]) -> Described:
    return Described(tuple(Description(text, SOURCE) for text in texts))


def _unavailable(why: str) -> Described:
    return Described((), (Diagnostic("unavailable", REASON, detail=why),))
