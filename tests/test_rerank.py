"""Identifier-weighted BM25 re-rank (spec §3.4) over a real index."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import make_git_repo

from ctx04_core.memo import RetrievalMemo
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings, SettingsError
from ctx04_core.stages.fuse import fuse
from ctx04_core.stages.query import build_query
from ctx04_core.stages.regions import own_lines
from ctx04_core.stages.rerank import signals, title_tag
from ctx04_core.types import Candidate, Query, RankedCandidate, Signal, Span

OpenRepo = Callable[[dict[str, str | bytes]], Repo]
# The plain §3.4 score: idf over the candidates, no evidence beside BM25.
SPEC = Settings(
    repository_idf=False, definition_boost=0.0, auxiliary_weight=1.0, location_boost=0.0,
    path_boost=0.0, title_boost=0.0,
    goal_weight=1.0,
)

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


def rerank(
    *, query: Query, candidates: tuple[Candidate, ...], repo: Repo, settings: Settings
) -> list[RankedCandidate]:
    """The rerank plugin's signals, fused as the pipeline fuses them."""
    found = signals(
        query=query, candidates=candidates, repo=repo, settings=settings, memo=RetrievalMemo()
    )
    return fuse(candidates, found, settings)


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
    settings = SPEC
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
    settings = SPEC
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
    settings = SPEC
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
    settings = SPEC
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


EVIDENCE = {
    "pkg/parse.py": "def parse_date(text):\n    return text.split('-')\n\n\n"
                    "def parse_time(text):\n    return text.split(':')\n",
    "pkg/other.py": "def parse_time(text):\n    return text\n",
    "tests/test_parse.py": "def test_parse_date():\n    assert parse_date('a-b') == ['a', 'b']\n",
}


def ranked_names(repo: Repo, task: str, **overrides: object) -> list[tuple[str, float]]:
    settings = SPEC.with_overrides(**overrides)
    candidates = tuple(
        definition(repo, q) for q in (
            "pkg.parse.parse_date", "pkg.parse.parse_time", "pkg.other.parse_time",
            "tests.test_parse.test_parse_date",
        )
    )
    query = query_for(task, repo, settings)
    ranked = rerank(query=query, candidates=candidates, repo=repo, settings=settings)
    return [(r.candidate.qualname or "", r.score) for r in ranked]


def test_the_spec_score_puts_the_test_second(open_repo: OpenRepo) -> None:
    repo = open_repo(EVIDENCE)
    assert [name for name, _ in ranked_names(repo, "parse_date splits on dashes")] == [
        "pkg.parse.parse_date", "tests.test_parse.test_parse_date", "pkg.other.parse_time",
        "pkg.parse.parse_time",
    ]


# Each piece of evidence beside BM25 multiplies exactly the scores it concerns.
@pytest.mark.parametrize(("task", "setting", "factors"), [
    # Tests weigh less; the definition they test does not change.
    ("parse_date splits on dashes", {"auxiliary_weight": 0.5},
     {"tests.test_parse.test_parse_date": 0.5, "pkg.parse.parse_date": 1.0}),
    # parse_date has one definition (x2), parse_time two (x1.5).
    ("parse_date and parse_time both fail", {"definition_boost": 1.0},
     {"pkg.parse.parse_date": 2.0, "pkg.other.parse_time": 1.5}),
    # parse_date's document matches only terms of the goal sentence
    # (parse_date, parse, date), so its score triples.
    ("parse_date is wrong. See also parse_time.", {"goal_weight": 3.0},
     {"pkg.parse.parse_date": 3.0}),
    # The goal's "parses" is "parse" once its plural s is dropped:
    # pkg/parse.py's path words are pkg and parse, pkg/other.py's pkg and other.
    ("Parses drop the seconds. parse_time is wrong.", {"path_boost": 1.0},
     {"pkg.parse.parse_time": 2.0, "pkg.other.parse_time": 1.0}),
    # The title is tagged with pkg/other.py's stem; pkg/parse.py is not it.
    ("[Other] parse_time drops the seconds", {"title_boost": 1.0},
     {"pkg.other.parse_time": 2.0, "pkg.parse.parse_time": 1.0}),
], ids=["auxiliary", "definition", "goal", "path", "title"])
def test_evidence_multiplies_the_scores_it_concerns(
    open_repo: OpenRepo, task: str, setting: dict[str, float], factors: dict[str, float]
) -> None:
    repo = open_repo(EVIDENCE)
    plain = dict(ranked_names(repo, task))
    weighted = dict(ranked_names(repo, task, **setting))
    assert {name: weighted[name] / plain[name] for name in factors} == pytest.approx(factors)


@pytest.mark.parametrize(("task", "tag"), [
    ("[Chaturbate] Consider using the API", "chaturbate"),
    ("spankbang - 403 Forbidden errors", "spankbang"),
    ("  date-utils: parse fails on leap days", "date_utils"),
    ("Fix: [x] is wrong", "fix"),
    ("fmt::join drops the format spec", None),
    ("parse_date splits on dashes", None),
    ("[Feature request] more formats", None),
    ("a: b", None),
])
def test_the_title_tag_is_the_leading_bracket_or_word_before_a_colon_or_dash(
    task: str, tag: str | None
) -> None:
    assert title_tag(task) == tag


def test_a_place_the_task_points_at_counts_more(open_repo: OpenRepo) -> None:
    repo = open_repo(EVIDENCE)
    settings = SPEC.with_overrides(location_boost=1.0)
    other = definition(repo, "pkg.other.parse_time")
    candidates = (definition(repo, "pkg.parse.parse_time"), replace(other, pointed_at=True))
    query = query_for("parse_time: the text split drops the seconds", repo, settings)
    plain = rerank(query=query, candidates=candidates, repo=repo, settings=SPEC)
    boosted = rerank(query=query, candidates=candidates, repo=repo, settings=settings)
    # The pointer doubles pkg/other.py's score, which puts it first.
    assert plain[0].candidate.qualname == "pkg.parse.parse_time"
    before = {r.candidate.qualname: r.score for r in plain}
    after = {r.candidate.qualname: r.score for r in boosted}
    assert after["pkg.other.parse_time"] == pytest.approx(before["pkg.other.parse_time"] * 2)
    assert after["pkg.parse.parse_time"] == before["pkg.parse.parse_time"]
    assert boosted[0].candidate.qualname == "pkg.other.parse_time"


def test_repository_idf_counts_every_definition(open_repo: OpenRepo) -> None:
    repo = open_repo(EVIDENCE)
    scores = dict(ranked_names(repo, "dashes split", repository_idf=True))
    total, frequency = repo.index.term_statistics(["split", "dashes"])
    # Seven nodes (three modules, four definitions); "split" is in the own code
    # of the two functions of pkg/parse.py; "dashes" is in none.
    assert (total, frequency) == (7, {"split": 2})
    idf = math.log((7 - 2 + 0.5) / (2 + 0.5) + 1)
    # 8, 8, 7 and 13 tokens: avgdl 9; parse_date holds "split" once.
    assert scores["pkg.parse.parse_date"] == pytest.approx(
        idf * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 8 / 9))
    )
    assert scores["pkg.other.parse_time"] == 0.0


CONTAINERS = """\
class Ledger:
    def post(self, amount):
        return amount

    def void(self, amount):
        return -amount


def audit(entries):
    return len(entries)
"""


def test_type_factor_orders_the_first_places_never_chooses_them(open_repo: OpenRepo) -> None:
    repo = open_repo({"ledger.py": CONTAINERS})
    candidates = tuple(
        definition(repo, name)
        for name in (
            "ledger.Ledger", "ledger.Ledger.post", "ledger.audit", "ledger.Ledger.void", "ledger"
        )
    )
    found = [Signal("match", (10.0, 9.0, 8.5, 8.8, 9.5), 1.0)]
    settings = SPEC.with_overrides(top_k=4)

    def order(factor: float) -> list[tuple[str, float]]:
        ranked = fuse(candidates, found, settings.with_overrides(type_factor=factor))
        return [(r.candidate.qualname, r.score) for r in ranked]

    assert order(1.0) == [("ledger.Ledger", 10.0), ("ledger", 9.5), ("ledger.Ledger.post", 9.0),
                          ("ledger.Ledger.void", 8.8)]
    # The class now counts 8.0: after both methods, yet still among the four;
    # audit (8.5) stays out, since the first four were chosen at full score.
    # The module keeps its score: its own lines are not a member's header.
    assert order(0.8) == [("ledger", 9.5), ("ledger.Ledger.post", 9.0),
                          ("ledger.Ledger.void", 8.8), ("ledger.Ledger", 8.0)]
    # With no signal the merged order stands, whatever the factor (the class
    # last, as merged; not re-sorted by path and line).
    unscored = fuse(candidates[::-1], [], settings.with_overrides(top_k=5, type_factor=0.8))
    assert [r.candidate.qualname for r in unscored] == [
        "ledger", "ledger.Ledger.void", "ledger.audit", "ledger.Ledger.post", "ledger.Ledger"
    ]
    with pytest.raises(SettingsError, match="type_factor"):
        settings.with_overrides(type_factor=0.0)
