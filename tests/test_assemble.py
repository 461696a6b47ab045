"""The hard token cap (spec §3.6) on hand-built excerpts."""

from __future__ import annotations

import pluggy

from ctx04_core import hookspecs
from ctx04_core.settings import Settings
from ctx04_core.stages import assemble as assemble_stage
from ctx04_core.stages.assemble import HEADER, assemble, render
from ctx04_core.tokens import count_tokens
from ctx04_core.types import Candidate, Diagnostic, Excerpt, Query, RankedCandidate, Span


def excerpt(
    rank: int,
    lines: list[tuple[int, str]],
    path: str = "pkg/mod.py",
    qualname: str | None = "pkg.mod.f",
    sources: tuple[str, ...] = ("ripgrep",),
) -> Excerpt:
    span = Span(path, lines[0][0], lines[-1][0])
    candidate = Candidate(span, "function" if qualname else "lines", qualname, sources)
    return Excerpt(RankedCandidate(candidate, rank, 1.0 / rank), tuple(lines))


def body(rank: int, n_lines: int) -> Excerpt:
    """A function of ``n_lines`` lines whose text is unique to its rank."""
    lines = [(1, f"def f{rank}(x):")] + [
        (i, f"    value_{rank}_{i} = compute(x, {i})") for i in range(2, n_lines + 1)
    ]
    return excerpt(rank, lines, path=f"pkg/m{rank}.py", qualname=f"pkg.m{rank}.f{rank}")


def test_render_exact_shape() -> None:
    entry = excerpt(
        1,
        [(12, "def remember(self, text):"), (13, "    self._open()"), (20, "    return x")],
        path="memstore.py",
        qualname="repo.memstore.MemStore.remember",
        sources=("ripgrep", "api-desc"),
    )
    assert render(entry) == (
        "### repo.memstore.MemStore.remember [memstore.py:12, ripgrep, api-desc]\n"
        "def remember(self, text):\n"
        "    self._open()\n"
        "⋮\n"
        "    return x\n"
        "\n"
    )


def test_unparsed_run_is_titled_by_path() -> None:
    entry = excerpt(1, [(3, "a: 1"), (4, "b: 2")], path="conf/app.yaml", qualname=None)
    assert render(entry) == "### conf/app.yaml [conf/app.yaml:3, ripgrep]\na: 1\nb: 2\n\n"


def test_everything_fits() -> None:
    first, second = body(1, 3), body(2, 2)
    result = assemble(excerpts=(first, second), settings=Settings())
    assert result.text == HEADER + render(first) + render(second)
    assert result.tokens == count_tokens(result.text)
    assert result.budget_tokens == 4000
    assert [e.included for e in result.entries] == [True, True]
    assert [e.tokens for e in result.entries] == [
        count_tokens(render(first)),
        count_tokens(render(second)),
    ]
    assert result.diagnostics == ()


def test_oversized_set_stays_under_the_default_cap() -> None:
    excerpts = tuple(body(rank, 40) for rank in range(1, 31))
    result = assemble(excerpts=excerpts, settings=Settings())
    assert sum(count_tokens(render(e)) for e in excerpts) > 4000
    assert result.tokens == count_tokens(result.text) <= 4000
    included = [e.included for e in result.entries]
    kept = included.count(True)
    # A prefix of the ranking survives: the lowest-ranked entries go first.
    assert included == [True] * kept + [False] * (30 - kept)
    assert result.text == (
        HEADER
        + "".join(render(e) for e in excerpts[:kept])
        + f"({30 - kept} lower-ranked candidates omitted by the token budget)\n"
    )
    assert result.diagnostics == tuple(
        Diagnostic("omitted", "token budget", path=f"pkg/m{rank}.py", detail=f"pkg.m{rank}.f{rank}")
        for rank in range(kept + 1, 31)
    )


def test_never_mid_entry_and_no_smaller_entry_jumps_ahead() -> None:
    small, big, tiny = body(1, 2), body(2, 60), body(3, 1)
    budget = count_tokens(HEADER + render(small) + render(tiny)) + 20
    result = assemble(excerpts=(small, big, tiny), settings=Settings(budget_tokens=budget))
    # ``tiny`` would fit after ``small``, but it ranks below ``big``, which does not.
    assert result.text == (
        HEADER + render(small) + "(2 lower-ranked candidates omitted by the token budget)\n"
    )
    assert [e.included for e in result.entries] == [True, False, False]
    for entry in result.entries:
        assert (entry.text in result.text) == entry.included


def test_footer_displaces_an_entry_that_fit_alone() -> None:
    first, second, third = body(1, 3), body(2, 3), body(3, 30)
    budget = count_tokens(HEADER + render(first) + render(second))
    result = assemble(excerpts=(first, second, third), settings=Settings(budget_tokens=budget))
    assert result.text == (
        HEADER + render(first) + "(2 lower-ranked candidates omitted by the token budget)\n"
    )
    assert result.tokens <= budget
    assert [d.path for d in result.diagnostics] == ["pkg/m2.py", "pkg/m3.py"]


def test_budget_smaller_than_the_header() -> None:
    result = assemble(excerpts=(body(1, 2),), settings=Settings(budget_tokens=5))
    assert (result.text, result.tokens) == ("", 0)
    assert [e.included for e in result.entries] == [False]
    assert len(result.diagnostics) == 1


def test_no_excerpts() -> None:
    result = assemble(excerpts=(), settings=Settings())
    assert (result.text, result.entries, result.diagnostics) == (HEADER, (), ())


def test_called_through_the_hook_with_every_argument() -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(assemble_stage)
    query = Query("t", (), (), (), (), (), "t")
    first = body(1, 2)
    result = pm.hook.assemble(query=query, excerpts=(first,), repo=None, settings=Settings())
    assert result.text == HEADER + render(first)
