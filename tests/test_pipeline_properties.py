"""Properties of query construction, merge and prune, over drawn inputs.

The quick default runs each property a hundred times; CI's second pytest
run (``--hypothesis-profile=thorough``, registered in conftest.py) runs each
ten thousand times. Merge and prune run on a real indexed repository, so
every span they see comes from the code index and every line from disk.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import shared_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.merge import merge
from ctx04_core.stages.prune import prune
from ctx04_core.stages.query import build_query
from ctx04_core.types import Candidate, Query, RankedCandidate, Span

# The module-scoped repository is shared by the examples: they only read it.
SHARED = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# --- query construction ----------------------------------------------------------------

NAMES = frozenset({"parse_header", "Cart", "total", "QuerySet", "get", "a", "the", "run_x"})
# Pieces that make identifiers, dotted names, paths, test ids, quotes and errors.
PIECES = [*"abcdeghprst_QSC .:,()'\"`\n-/#>$\\", "py", "::", "Error: ", "Cart", "total"]
CODEISH = st.lists(st.sampled_from(PIECES), max_size=150).map("".join)
TASK = CODEISH | st.text(max_size=200)


@SHARED
@given(task=TASK, error=st.none() | TASK, target=st.none() | CODEISH.filter(bool))
def test_a_query_is_bounded_and_the_same_every_time(
    task: str, error: str | None, target: str | None
) -> None:
    limits = Settings()
    query = build_query(task, latest_error=error, repro_target=target, names=NAMES,
                        settings=limits)
    assert query == build_query(task, latest_error=error, repro_target=target, names=NAMES,
                                settings=limits)
    assert query.task_text == task
    assert query.goal_hint in task and len(query.goal_hint) <= limits.max_goal_hint_chars
    for terms, cap in (
        (query.identifiers, limits.max_identifiers), (query.unresolved, limits.max_identifiers),
        (query.error_strings, limits.max_error_strings), (query.test_names, limits.max_test_names),
        (query.file_paths, limits.max_file_paths),
    ):
        assert len(terms) <= cap
        assert len(set(terms)) == len(terms)
        assert all(0 < len(term) <= limits.max_term_chars for term in terms)
    assert not set(query.identifiers) & set(query.unresolved)


# --- merge and prune over a real index ---------------------------------------------------

FILES: dict[str, str | bytes] = {
    "shop/cart.py": (
        '"""Carts."""\n'                                   # 1
        "import os\n"
        "\n"
        "\n"
        "class Cart:\n"                                    # 5
        "    rate = 2\n"
        "\n"
        "    def total(self, items):\n"                    # 8
        "        subtotal = sum(items)\n"
        "        return subtotal * self.rate\n"
        "\n"
        "    class Line:\n"                                # 12
        "        def price(self):\n"                       # 13
        "            return (1 +\n"
        "                    2)\n"
        "\n"
        "\n"
        "def checkout(cart):\n"                            # 18
        "    def pay(amount):\n"                           # 19
        "        return amount\n"
        "    return pay(cart.total([1]))\n"
        "\n"
        "\n"
        "LIMIT = checkout(\n"                              # 24
        "    Cart())\n"
    ),
    "shop/broken.py": "def half(:\n    return 1\n\n\nx = 2\n",  # a syntax error: runs of lines
    "README.md": "# Shop\n\nA cart.\n",
}
LINES = {path: str(text).count("\n") for path, text in FILES.items()}
PATHS = sorted(FILES)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    yield from shared_repo(tmp_path_factory, FILES)


@st.composite
def hits(draw: st.DrawFn) -> list[Candidate]:
    """Raw one-line hits and runs of lines, as recall sources propose them."""
    drawn = []
    for _ in range(draw(st.integers(0, 12))):
        path = draw(st.sampled_from(PATHS))
        start = draw(st.integers(1, LINES[path]))
        source = draw(st.sampled_from(("ripgrep", "bm25", "traceback")))
        term = draw(st.sampled_from(("cart", "total", "pay", "")))
        if draw(st.booleans()):
            drawn.append(Candidate(Span(path, start, start), "line", None, (source,),
                                   terms=(term,) if term else (), hit_lines=(start,)))
        else:
            end = draw(st.integers(start, LINES[path]))
            drawn.append(Candidate(Span(path, start, end), "lines", None, (source,)))
    return drawn


def shape(candidates: tuple[Candidate, ...]) -> list[tuple[Span, str, str | None, frozenset[str]]]:
    return [(c.span, c.kind, c.qualname, frozenset(c.sources)) for c in candidates]


@SHARED
@given(recalled=hits(), order=st.randoms(use_true_random=False))
def test_merge_covers_every_hit_once_in_any_order(
    repo: Repo, recalled: list[Candidate], order: object
) -> None:
    merged = merge(recalled, repo)
    shuffled = list(recalled)
    order.shuffle(shuffled)  # type: ignore[attr-defined]
    # Provenance keeps first-seen order; what is merged does not depend on it.
    assert shape(merge(shuffled, repo)) == shape(merged)
    assert merge(merged, repo) == merged
    keys = [(c.span.path, c.span.start_line, c.span.end_line, c.qualname or "") for c in merged]
    assert keys == sorted(set(keys))
    for hit in recalled:
        holders = [c for c in merged if c.span.path == hit.span.path
                   and c.span.start_line <= hit.span.start_line <= c.span.end_line]
        assert holders, hit
        assert any(set(hit.sources) <= set(c.sources) for c in holders)
    runs = [c for c in merged if c.kind == "lines"]
    for first, second in zip(runs, runs[1:], strict=False):
        if first.span.path == second.span.path:  # runs that touch are one run
            assert second.span.start_line > first.span.end_line + 1


@SHARED
@given(recalled=hits(), order=st.randoms(use_true_random=False),
       goal=st.sampled_from(("cart total", "pay the amount", "rate", "")),
       budget=st.integers(1, 4000))
def test_prune_keeps_real_lines_of_each_candidate_in_rank_order(
    repo: Repo, recalled: list[Candidate], order: object, goal: str, budget: int
) -> None:
    merged = list(merge(recalled, repo))
    order.shuffle(merged)  # type: ignore[attr-defined]
    ranked = tuple(
        RankedCandidate(c, rank, 1.0 / rank) for rank, c in enumerate(merged, start=1)
    )
    query = Query(task_text=goal, identifiers=tuple(goal.split()), unresolved=(),
                  error_strings=(), test_names=(), file_paths=(), goal_hint=goal)
    limits = Settings(budget_tokens=budget)
    excerpts = prune(query=query, ranked=ranked, reserve=(), repo=repo, settings=limits)
    assert excerpts == prune(query=query, ranked=ranked, reserve=(), repo=repo, settings=limits)
    # Last, at most one excerpt of the first candidate's file's head: its
    # import statements (leading_imports_max) and the blank lines after them,
    # ranked after the ranking.
    if excerpts and excerpts[-1].ranked.candidate.sources == ("head",):
        imports = excerpts.pop()
        assert imports.ranked.rank == len(ranked) + 1
        assert imports.ranked.candidate.span.path == ranked[0].candidate.span.path
        written = [line for _, line in imports.lines if line.strip()]
        assert written and all(line.startswith(("from ", "import ")) for line in written)
    positions = [ranked.index(e.ranked) for e in excerpts]
    assert positions == sorted(set(positions))  # a subsequence of the ranking
    for excerpt in excerpts:
        span = excerpt.ranked.candidate.span
        numbers = [n for n, _ in excerpt.lines]
        assert numbers == sorted(set(numbers)) and numbers
        text = str(FILES[span.path]).split("\n")
        # Its own lines, blank lines beside them (blank_line_ends), and the
        # first candidate's neighbouring lines (first_run_context).
        reach = limits.first_run_context if excerpt.ranked.rank == 1 else 0
        assert all(span.start_line - reach <= n <= span.end_line + reach
                   or not text[n - 1].strip() for n in numbers)
        assert all(line == text[n - 1] for n, line in excerpt.lines)
