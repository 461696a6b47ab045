"""Member expansion: the methods of a leading class become candidates of their own."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from conftest import make_git_repo

from ctx04_core.hookspecs import hookimpl
from ctx04_core.memo import RetrievalMemo
from ctx04_core.pipeline import Retrieval, retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Diagnostic

EXPRESSIONS = {
    "expressions.py": (
        "class Subquery:\n"  # 1
        '    template = "(%(subquery)s)"\n'
        "    contains_aggregate = False\n"
        "\n"
        "    def __init__(self, queryset, output_field=None):\n"  # 5
        "        self.query = queryset.query\n"
        "        self.output_field = output_field\n"
        "\n"
        "    def as_sql(self, compiler, connection):\n"  # 9
        "        sql, params = self.query.as_sql(compiler, connection)\n"
        "        return self.template % {'subquery': sql[1:-1]}, params\n"
        "\n"
        "    def copy(self):\n"  # 13
        "        return Subquery(self.query)\n"
        "\n"
        "\n"
        "class Exists(Subquery):\n"  # 17
        "    negated = False\n"
    ),
}
# Prose, no identifier: the class is found by its words, not by its name,
# so no call-graph seed brings its methods.
TASK = "the subquery template strips the first and last character of the SQL"


# The other signal plugins, and the callees the call graph proposes after the
# first ranking too, reorder what this test counts on; members alone is under test.
OTHER_SIGNALS = ["meaning", "history", "callgraph"]


def ranked(result: Retrieval) -> list[tuple[str | None, tuple[str, ...]]]:
    return [(r.candidate.qualname, r.candidate.sources) for r in result.candidates]


def test_the_leading_class_brings_its_methods(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", EXPRESSIONS)
    without = retrieve(TASK, root, disable=["pin", "members", *OTHER_SIGNALS])
    assert ranked(without) == [
        ("expressions.Subquery.as_sql", ("apidesc", "bm25")),
        ("expressions.Subquery", ("apidesc", "bm25")),
        ("expressions.Subquery.copy", ("bm25",)),
        ("expressions.Exists", ("apidesc", "bm25")),
    ]
    result = retrieve(TASK, root, disable=["pin", *OTHER_SIGNALS])
    # Subquery (rank 2) has three methods. (The two classes are ordered at
    # type_factor times their score: copy comes before Exists.)
    assert result.recalled["members"] == 3
    assert ranked(result) == [
        ("expressions.Subquery.as_sql", ("apidesc", "bm25", "members")),
        ("expressions.Subquery", ("apidesc", "bm25")),
        ("expressions.Subquery.copy", ("bm25", "members")),
        ("expressions.Exists", ("apidesc", "bm25")),
        ("expressions.Subquery.__init__", ("members",)),
    ]
    narrow = retrieve(
        TASK, root, disable=["pin", *OTHER_SIGNALS], settings=Settings(members_ranks=1)
    )
    assert "members" not in {s for r in narrow.candidates for s in r.candidate.sources}


def test_the_cap_is_reported(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", EXPRESSIONS)
    result = retrieve(
        TASK, root, disable=["pin", *OTHER_SIGNALS], settings=Settings(members_limit=2)
    )
    assert result.recalled["members"] == 2
    assert Diagnostic(
        "unavailable", "truncated",
        detail="3 members of the leading containers, kept the first 2",
    ) in result.diagnostics


class MemoWatch:
    """A signals plugin that keeps one value per candidate in the memo, and
    notes which memos it was given and what it had to compute."""

    def __init__(self) -> None:
        self.memos: list[RetrievalMemo] = []
        self.computed: list[str | None] = []

    @hookimpl
    def signals(self, candidates: tuple[Candidate, ...], memo: RetrievalMemo) -> None:
        self.memos.append(memo)
        for c in candidates:
            memo.get("watch", c.span, partial(self.computed.append, c.qualname))


def test_both_signal_passes_share_one_memo_per_retrieval(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", EXPRESSIONS)
    pm = plugin_manager(disable=["pin", *OTHER_SIGNALS])
    watch = MemoWatch()
    pm.register(watch)
    retrieve(TASK, root, plugins=pm)
    # The recalled pool, then the pool the three members grew: one memo, and
    # each candidate's value computed once across the two passes.
    assert len(watch.memos) == 2 and watch.memos[0] is watch.memos[1]
    assert sorted(map(str, watch.computed)) == [
        "expressions.Exists", "expressions.Subquery", "expressions.Subquery.__init__",
        "expressions.Subquery.as_sql", "expressions.Subquery.copy",
    ]
    retrieve(TASK, root, plugins=pm)
    assert len(watch.memos) == 4 and watch.memos[2] is not watch.memos[0]
    assert len(watch.computed) == 10
