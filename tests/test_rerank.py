"""Identifier-weighted BM25 re-rank (spec §3.4) over a real index."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_git_repo

from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.stages.regions import own_lines
from ctx04_core.stages.rerank import rerank
from ctx04_core.types import Candidate, Query, Span

OpenRepo = Callable[[dict[str, str | bytes]], Repo]

WEIGHTS = """\
def remember(x):
    return x


def uses_symbol(y):
    value = remember(y)
    return value + y + y


def c(y):
    # memory
    return y
"""


def definition(repo: Repo, qualname: str) -> Candidate:
    [node] = [n for n in repo.index.lookup(qualname) if n.qualname == qualname]
    return Candidate(node.span, node.kind, node.qualname, ("test",))


def query_for(task: str, repo: Repo, settings: Settings) -> Query:
    return build_query(task, names=repo.index.names(), settings=settings)


@pytest.fixture
def open_repo(tmp_path: Path, indexed: Callable[..., Repo]) -> OpenRepo:
    def build(files: dict[str, str | bytes]) -> Repo:
        return indexed(make_git_repo(tmp_path / "repo", files))

    return build


def test_symbol_match_outranks_comment_match(open_repo: OpenRepo) -> None:
    repo = open_repo({"w.py": WEIGHTS})
    symbol, comment = definition(repo, "w.uses_symbol"), definition(repo, "w.c")
    settings = Settings()
    query = query_for("remember memory", repo, settings)
    ranked = rerank(query=query, candidates=(comment, symbol), repo=repo, settings=settings)
    assert [(r.candidate, r.rank) for r in ranked] == [(symbol, 1), (comment, 2)]
    # 12 and 6 tokens, avgdl 9; each term in one of the two documents.
    idf = math.log((2 - 1 + 0.5) / (1 + 0.5) + 1)
    assert ranked[0].score == pytest.approx(3.0 * idf * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 12 / 9)))
    assert ranked[1].score == pytest.approx(1.0 * idf * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 6 / 9)))
    # Without the identifier weight the shorter comment match would win.
    flat = settings.with_overrides(identifier_weight=1.0)
    unweighted = rerank(query=query, candidates=(comment, symbol), repo=repo, settings=flat)
    assert [r.candidate for r in unweighted] == [comment, symbol]


def test_rare_identifier_outranks_frequent_one(
    open_repo: OpenRepo,
) -> None:
    callers = "".join(f"\n\ndef f{i}():\n    return common_call()\n" for i in range(4))
    repo = open_repo(
        {
            "lib.py": "def common_call():\n    pass\n\n\ndef rare_call():\n    pass\n",
            "use.py": "def g():\n    return rare_call()\n" + callers,
        }
    )
    candidates = tuple(definition(repo, f"use.{name}") for name in ("f0", "f1", "f2", "f3", "g"))
    settings = Settings()
    query = query_for("common_call and rare_call", repo, settings)
    ranked = rerank(query=query, candidates=candidates, repo=repo, settings=settings)
    assert ranked[0].candidate.qualname == "use.g"
    assert ranked[0].score > ranked[1].score


def test_top_k_cap_and_tie_order(open_repo: OpenRepo) -> None:
    repo = open_repo(
        {
            "b.py": "".join(f"def b{i}():\n    pass\n\n\n" for i in range(15)),
            "a.py": "".join(f"def a{i}():\n    pass\n\n\n" for i in range(15)),
        }
    )
    nodes = [n for path in ("b.py", "a.py") for n in repo.index.file_nodes(path)]
    candidates = tuple(
        Candidate(n.span, n.kind, n.qualname, ("test",)) for n in nodes if n.kind == "function"
    )
    settings = Settings()
    ranked = rerank(
        query=query_for("unrelated words", repo, settings),
        candidates=candidates,
        repo=repo,
        settings=settings,
    )
    assert len(ranked) == 20
    assert [r.rank for r in ranked] == list(range(1, 21))
    # All score 0: ties fall back to path, then start line.
    assert {r.score for r in ranked} == {0.0}
    assert [r.candidate.qualname for r in ranked] == (
        [f"a.a{i}" for i in range(15)] + [f"b.b{i}" for i in range(5)]
    )
    fewer = rerank(
        query=query_for("b3", repo, settings),
        candidates=candidates,
        repo=repo,
        settings=settings.with_overrides(top_k=3),
    )
    # "b3" tokenizes to b3, b, 3: "3" (in two candidates) outweighs "b" (in fifteen).
    assert [r.candidate.qualname for r in fewer] == ["b.b3", "a.a3", "b.b0"]


def test_nothing_to_rank(open_repo: OpenRepo) -> None:
    repo = open_repo({"a.py": "x = 1\n"})
    settings = Settings()
    assert (
        rerank(query=query_for("x", repo, settings), candidates=(), repo=repo, settings=settings)
        == []
    )


def test_own_lines_leave_out_nested_definitions(
    open_repo: OpenRepo,
) -> None:
    source = (
        "import os\n"  # 1
        "\n"
        "class Store:\n"  # 3
        "    limit = 3\n"
        "\n"
        "    @property\n"  # 6
        "    def size(self):\n"
        "        return 1\n"  # 8
        "    other = 4\n"  # 9
        "\n"
        "def top():\n"  # 11
        "    def inner():\n"
        "        pass\n"
        "    return inner\n"  # 14
    )
    repo = open_repo({"m.py": source})
    module, store, size, top = (
        definition(repo, name) for name in ("m", "m.Store", "m.Store.size", "m.top")
    )
    assert own_lines(module, repo) == [1, 2, 10]
    assert own_lines(store, repo) == [3, 4, 5, 9]
    assert own_lines(size, repo) == [6, 7, 8]
    assert own_lines(top, repo) == [11, 12, 13, 14]
    beyond = Candidate(Span("m.py", 13, 40), "lines", None, ("test",))
    assert own_lines(beyond, repo) == [13, 14]
    assert own_lines(Candidate(Span("gone.py", 1, 2), "lines", None, ("test",)), repo) == []
