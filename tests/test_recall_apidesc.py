"""API-description recall: the task's words against the real index's descriptions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import ctx04_recall_apidesc as apidesc
from conftest import make_git_repo

from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.text import tokenize
from ctx04_core.types import Candidate, Description, Diagnostic, Query, Recall, Span

Indexed = Callable[..., Repo]

STORE = (
    "class UserForm:\n"
    "    def save(self):\n"
    "        return write_row(self)\n"
    "\n"
    "\n"
    "def write_row(record):\n"
    '    """Commit one record to the database inside a transaction."""\n'
    "    return record\n"
    "\n"
    "\n"
    "def render_page(template):\n"
    '    """Format an HTML page from a template."""\n'
    "    return template\n"
)


def recall(repo: Repo, q: Query, settings: Settings | None = None) -> Recall:
    result = apidesc.recall(query=q, repo=repo, settings=settings or Settings())
    assert result is not None
    return result


def test_a_docstring_describing_the_task_is_recalled_without_a_shared_identifier(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"store.py": STORE}))
    task = "UserForm.save loses data: saving must commit the database transaction."
    q = build_query(task, names=repo.index.names(), settings=Settings())
    assert q.identifiers == ("UserForm.save", "UserForm", "save")
    # Nothing in write_row's name or signature shares a term with the identifiers.
    assert not set(tokenize("def write_row(record):")) & set(tokenize(" ".join(q.identifiers)))
    result = recall(repo, q)
    assert [c.qualname for c in result.candidates] == [
        "store.UserForm", "store.write_row", "store.UserForm.save",
    ]
    write_row = result.candidates[1]
    assert write_row == Candidate(
        span=Span("store.py", 6, 8), kind="function", qualname="store.write_row",
        sources=("apidesc",), recall_score=write_row.recall_score,
    )
    scores = [c.recall_score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)
    assert scores[-1] > 0
    assert result.diagnostics == ()


def test_the_goal_hint_is_searched_too(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"store.py": STORE}))
    q = Query(
        task_text="", identifiers=(), unresolved=(), error_strings=(), test_names=(),
        file_paths=(), goal_hint="format html page",
    )
    assert [c.qualname for c in recall(repo, q).candidates] == ["store.render_page"]


def test_at_most_the_limit_of_matches_best_first(tmp_path: Path, indexed: Indexed) -> None:
    body = "".join(
        f'def parse_header_{i:02d}(text):\n    """Parse the header."""\n    return text\n\n\n'
        for i in range(25)
    )
    repo = indexed(make_git_repo(tmp_path / "r", {"headers.py": body}))
    q = build_query("Parse the header of a message.", names=repo.index.names(), settings=Settings())
    # Equal descriptions score alike and stay in index order.
    result = recall(repo, q)
    assert [c.qualname for c in result.candidates] == [
        f"headers.parse_header_{i:02d}" for i in range(20)
    ]
    few = recall(repo, q, Settings(apidesc_limit=3))
    assert [c.qualname for c in few.candidates] == [
        f"headers.parse_header_{i:02d}" for i in range(3)
    ]


def test_a_task_matching_no_description_recalls_nothing(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"store.py": STORE}))
    q = build_query("Quux zorble.", names=repo.index.names(), settings=Settings())
    assert recall(repo, q) == Recall("apidesc", (), ())


def test_the_most_common_terms_past_the_postings_budget_are_left_out(
    tmp_path: Path, indexed: Indexed
) -> None:
    # Every description holds "value"; one holds "digest" too.
    body = "".join(
        f'def scale_{i}(value):\n    """Scale a value."""\n    return value\n\n\n' for i in range(4)
    ) + 'def digest(value):\n    """The digest of a value."""\n    return value\n'
    repo = indexed(make_git_repo(tmp_path / "r", {"sums.py": body}))
    q = Query(
        task_text="digest value", identifiers=(), unresolved=(), error_strings=(),
        test_names=(), file_paths=(), goal_hint="",
    )
    # "digest" is in one description, "value" in five: 1 + 5 is past 5.
    bounded = recall(repo, q, Settings(search_postings_budget=5))
    assert [c.qualname for c in bounded.candidates] == ["sums.digest"]
    assert bounded.diagnostics == (
        Diagnostic(
            "omitted", "apidesc terms budget", detail="1 common terms not searched: 'value'"
        ),
    )
    whole = recall(repo, q, Settings(search_postings_budget=6))
    assert [c.qualname for c in whole.candidates] == [
        "sums.digest", "sums.scale_0", "sums.scale_1", "sums.scale_2", "sums.scale_3",
    ]
    assert whole.diagnostics == ()


def test_the_query_descriptions_recall_with_their_own_provenance(
    tmp_path: Path, indexed: Indexed
) -> None:
    """A description a plugin added (a model's) is searched against the index's
    descriptions on its own; what only it finds carries its source, and a
    definition the task's words find too is proposed under both."""
    repo = indexed(make_git_repo(tmp_path / "r", {"store.py": STORE}))
    q = build_query("Format HTML.", names=repo.index.names(), settings=Settings())
    assert [c.qualname for c in recall(repo, q).candidates] == ["store.render_page"]
    described = replace(q, descriptions=(
        Description("commit record database transaction", "model-query"),
        Description("html template", "model-query"),
    ))
    result = recall(repo, described)
    assert [(c.qualname, c.sources) for c in result.candidates] == [
        ("store.render_page", ("apidesc",)),
        ("store.write_row", ("model-query",)),
        ("store.render_page", ("model-query",)),
    ]
    assert result.candidates[1] == Candidate(
        span=Span("store.py", 6, 8), kind="function", qualname="store.write_row",
        sources=("model-query",), recall_score=result.candidates[1].recall_score,
    )
    assert result.diagnostics == ()
    # At most description_recall_limit in all, the first description's best first.
    one = recall(repo, described, Settings(description_recall_limit=1))
    assert [(c.qualname, c.sources) for c in one.candidates] == [
        ("store.render_page", ("apidesc",)), ("store.write_row", ("model-query",)),
    ]
    assert recall(repo, described, Settings(description_recall_limit=0)) == recall(repo, q)
