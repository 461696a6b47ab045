"""Whole-repository BM25 recall: the task's words against every definition's own code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ctx04_recall_bm25 as bm25
from conftest import make_git_repo

from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.text import content_terms
from ctx04_core.types import Diagnostic, Recall

Indexed = Callable[..., Repo]

CACHE = '''"""A small cache."""

DEFAULT_TIMEOUT = 300


class Cache:
    """Keeps values for a while."""

    backend = "memory"

    def get(self, key):
        entry = self.entries.get(key)
        if entry is None or entry.expires_at < now():
            return None
        return entry.value

    def set(self, key, value, timeout=DEFAULT_TIMEOUT):
        self.entries[key] = Entry(value, now() + timeout)


def now():
    return 0
'''


def recall(repo: Repo, task: str, **overrides: object) -> Recall:
    query = build_query(task, names=repo.index.names(), settings=Settings())
    result = bm25.recall(query=query, repo=repo, settings=Settings().with_overrides(**overrides))
    assert result is not None
    return result


def test_content_terms_drop_stopwords_and_repeat_nothing() -> None:
    assert content_terms("The entry is returned after it expires, the entry!") == [
        "entry", "returned", "expires",
    ]


def test_code_that_uses_the_words_of_the_task_is_recalled(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"cache.py": CACHE}))
    result = recall(repo, "An expired entry is still returned until its value is replaced")
    # get() shares "entry" and "value" with the task, set() only "value"; the
    # module and the class share none.
    assert [c.qualname for c in result.candidates] == ["cache.Cache.get", "cache.Cache.set"]
    assert [c.sources for c in result.candidates] == [("bm25",), ("bm25",)]
    assert result.candidates[0].recall_score > result.candidates[1].recall_score > 0


def test_a_class_is_scored_on_its_own_lines_not_its_methods(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"cache.py": CACHE}))
    # "backend" and "memory" appear only in the class body outside the methods;
    # "entries" only inside the methods, so the class does not match it.
    assert [c.qualname for c in recall(repo, "the memory backend").candidates] == ["cache.Cache"]
    assert "cache.Cache" not in [c.qualname for c in recall(repo, "entries").candidates]


def test_module_level_code_belongs_to_the_module(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"cache.py": CACHE}))
    assert [c.qualname for c in recall(repo, "DEFAULT_TIMEOUT").candidates] == [
        "cache", "cache.Cache.set",
    ]


def test_the_cap(tmp_path: Path, indexed: Indexed) -> None:
    many = "".join(f"def handler_{i}():\n    return lookup_widget({i})\n\n" for i in range(30))
    repo = indexed(make_git_repo(tmp_path / "r", {"many.py": many}))
    assert len(recall(repo, "lookup_widget fails").candidates) == 20
    assert len(recall(repo, "lookup_widget fails", bm25_recall_limit=3).candidates) == 3


# "value" is in the own code of all five functions, "digest" in one.
SHARED = "".join(f"def handler_{i}(value):\n    return value + {i}\n\n\n" for i in range(4)) + (
    "def checksum(value):\n    return digest(value)\n"
)


def test_the_most_common_terms_past_the_postings_budget_are_left_out(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"sums.py": SHARED}))
    assert repo.index.term_statistics(["digest", "value"]) == (6, {"digest": 1, "value": 5})
    # 1 + 5 rows is past a budget of 5: the rarer term is searched alone.
    bounded = recall(repo, "digest of a value", search_postings_budget=5)
    assert [c.qualname for c in bounded.candidates] == ["sums.checksum"]
    assert bounded.diagnostics == (
        Diagnostic("omitted", "bm25 terms budget", detail="1 common terms not searched: 'value'"),
    )
    # Within the budget nothing is left out, and nothing is said.
    whole = recall(repo, "digest of a value", search_postings_budget=6)
    assert [c.qualname for c in whole.candidates] == [
        "sums.checksum", "sums.handler_0", "sums.handler_1", "sums.handler_2", "sums.handler_3",
    ]
    assert whole.diagnostics == ()


def test_the_rarest_term_is_searched_whatever_the_budget(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", {"sums.py": SHARED}))
    result = recall(repo, "a value", search_postings_budget=0)
    assert len(result.candidates) == 5
    assert result.diagnostics == ()
