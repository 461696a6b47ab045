"""The hard caps (spec §3.6 and the source-references budgets) on hand-built excerpts."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pluggy
import pytest
from conftest import make_git_repo

from ctx04_core import hookspecs
from ctx04_core.evidence import HEADER
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages import assemble as assemble_stage
from ctx04_core.stages.assemble import assemble
from ctx04_core.tokens import count_tokens
from ctx04_core.types import (
    Candidate,
    Diagnostic,
    Excerpt,
    Query,
    RankedCandidate,
    SourceRef,
    Span,
)

NOTHING_CUT = "Coverage: nothing cut or refused; recall is not exhaustive.\n"


def module_text(rank: int, n_lines: int) -> str:
    """A function of ``n_lines`` lines whose text is unique to its rank."""
    lines = [f"def f{rank}(x):"] + [
        f"    value_{rank}_{i} = compute(x, {i})" for i in range(2, n_lines + 1)
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def repo(tmp_path: Path, indexed: Callable[..., Repo]) -> Repo:
    files: dict[str, str | bytes] = {
        f"pkg/m{rank}.py": module_text(rank, 60) for rank in range(1, 31)
    }
    files["memstore.py"] = "\n" * 11 + (
        "def remember(self, text):\n    self._open()\n" + "    pass\n" * 6 + "    return x\n"
    )
    files["wide.py"] = "def wide():\n    s = '" + "é" * 200 + "'\n"
    return indexed(make_git_repo(tmp_path / "repo", files))


def excerpt(rank: int, n_lines: int, sources: tuple[str, ...] = ("ripgrep",)) -> Excerpt:
    lines = module_text(rank, n_lines).splitlines()
    path, qualname = f"pkg/m{rank}.py", f"pkg.m{rank}.f{rank}"
    candidate = Candidate(Span(path, 1, 60), "function", qualname, sources)
    return Excerpt(RankedCandidate(candidate, rank, 1.0 / rank), tuple(enumerate(lines, 1)))


def digest(repo: Repo, path: str) -> str:
    return hashlib.sha256((repo.root / path).read_bytes()).hexdigest()


def entry_text(repo: Repo, item: Excerpt) -> str:
    """What the slice must show for ``item``: heading with its reference, lines, blank line."""
    path = item.ranked.candidate.span.path
    last = item.lines[-1][0]
    where = f"{path}:1" if last == 1 else f"{path}:1-{last}"
    sources = ", ".join(item.ranked.candidate.sources)
    return (
        f"### {item.ranked.candidate.qualname} [{where}, sha256:{digest(repo, path)[:12]}, "
        f"{sources}]\n" + "".join(f"{text}\n" for _, text in item.lines) + "\n"
    )


def run(repo: Repo, *excerpts: Excerpt, diagnostics: tuple[Diagnostic, ...] = (),
        **overrides: object) -> object:
    return assemble(
        excerpts=excerpts, diagnostics=diagnostics, repo=repo,
        settings=Settings().with_overrides(**overrides),
    )


def test_exact_shape_with_gap_marker_and_reference(repo: Repo) -> None:
    candidate = Candidate(Span("memstore.py", 12, 20), "method", "repo.memstore.MemStore.remember",
                          ("ripgrep", "apidesc"))
    item = Excerpt(RankedCandidate(candidate, 1, 2.0), (
        (12, "def remember(self, text):"), (13, "    self._open()"), (20, "    return x"),
    ))
    result = assemble(excerpts=(item,), diagnostics=(), repo=repo, settings=Settings())
    quoted = "def remember(self, text):\n    self._open()\n⋮\n    return x\n"
    assert result.text == (
        HEADER
        + "### repo.memstore.MemStore.remember [memstore.py:12-20, "
        f"sha256:{digest(repo, 'memstore.py')[:12]}, ripgrep, apidesc]\n"
        + quoted + "\n" + NOTHING_CUT
    )
    [entry] = result.entries
    assert entry.evidence.text == quoted
    assert entry.evidence.ref == SourceRef(
        "memstore.py", 12, 20, digest(repo, "memstore.py"),
        hashlib.sha256(quoted.encode()).hexdigest(), False, repo.base,
    )


def test_a_long_line_is_cut_at_a_utf8_boundary_and_marked_shortened(repo: Repo) -> None:
    line = "    s = '" + "é" * 200 + "'"
    item = Excerpt(
        RankedCandidate(Candidate(Span("wide.py", 1, 2), "function", "wide.wide", ("ripgrep",)),
                        1, 1.0),
        ((1, "def wide():"), (2, line)),
    )
    result = assemble(excerpts=(item,), diagnostics=(), repo=repo, settings=Settings())
    shown = line.encode()[:160].decode("utf-8", "ignore")
    assert len(shown.encode()) == 159  # 9 ASCII bytes, then 75 two-byte characters
    assert result.entries[0].evidence.text == f"def wide():\n{shown}\n"
    assert result.entries[0].evidence.ref.shortened is True


def test_everything_fits(repo: Repo) -> None:
    first, second = excerpt(1, 3), excerpt(2, 2)
    result = assemble(excerpts=(first, second), diagnostics=(), repo=repo, settings=Settings())
    assert result.text == HEADER + entry_text(repo, first) + entry_text(repo, second) + NOTHING_CUT
    assert result.tokens == count_tokens(result.text)
    assert [e.included for e in result.entries] == [True, True]
    assert [e.tokens for e in result.entries] == [
        count_tokens(entry_text(repo, first)), count_tokens(entry_text(repo, second)),
    ]
    assert result.diagnostics == ()


def test_oversized_set_keeps_a_prefix_within_the_token_cap(repo: Repo) -> None:
    excerpts = tuple(excerpt(rank, 40) for rank in range(1, 31))
    result = assemble(excerpts=excerpts, diagnostics=(), repo=repo, settings=Settings())
    assert sum(count_tokens(entry_text(repo, e)) for e in excerpts) > 4000
    assert result.tokens == count_tokens(result.text) <= 4000
    included = [e.included for e in result.entries]
    kept = included.count(True)
    # A prefix of the ranking survives: the lowest-ranked entries go first.
    assert 0 < kept < 30
    assert included == [True] * kept + [False] * (30 - kept)
    assert result.text.startswith(HEADER + "".join(entry_text(repo, e) for e in excerpts[:kept]))
    assert result.diagnostics == tuple(
        Diagnostic("omitted", "token budget", f"pkg/m{rank}.py", f"pkg.m{rank}.f{rank}")
        for rank in range(kept + 1, 31)
    )
    assert result.text.endswith(
        f"Coverage: omitted {30 - kept} (pkg/m{kept + 1}.py: token budget, "
        f"pkg/m{kept + 2}.py: token budget, pkg/m{kept + 3}.py: token budget, …); "
        "recall is not exhaustive.\n"
    )


def test_never_mid_entry_and_no_smaller_entry_jumps_ahead(repo: Repo) -> None:
    small, big, tiny = excerpt(1, 20), excerpt(2, 60), excerpt(3, 1)
    budget = count_tokens(HEADER + entry_text(repo, big)) + 40
    result = assemble(excerpts=(small, big, tiny), diagnostics=(), repo=repo,
                      settings=Settings(budget_tokens=budget))
    # ``big`` fits alone but not after ``small``; ``tiny`` would fit after
    # ``small``, but it ranks below ``big``.
    assert [e.included for e in result.entries] == [True, False, False]
    assert result.text.startswith(HEADER + entry_text(repo, small) + "Coverage: omitted 2 (")
    for entry in result.entries:
        assert (entry.text in result.text) == entry.included


def test_an_entry_larger_than_the_budget_does_not_hide_the_rest(repo: Repo) -> None:
    huge, small, tiny = excerpt(1, 60), excerpt(2, 2), excerpt(3, 1)
    budget = count_tokens(HEADER + entry_text(repo, small) + entry_text(repo, tiny)) + 40
    assert count_tokens(HEADER + entry_text(repo, huge)) > budget
    result = assemble(excerpts=(huge, small, tiny), diagnostics=(), repo=repo,
                      settings=Settings(budget_tokens=budget))
    assert [e.included for e in result.entries] == [False, True, True]
    assert result.text == (
        HEADER + entry_text(repo, small) + entry_text(repo, tiny)
        + "Coverage: omitted 1 (pkg/m1.py: token budget); recall is not exhaustive.\n"
    )


def test_the_coverage_line_reports_what_recall_could_not_do(repo: Repo) -> None:
    found = (
        Diagnostic(
            "unavailable", "truncated", None, "'send': more than 40 hits, kept the first 40"
        ),
        Diagnostic("excluded", "larger than 1048576 bytes", "big.py"),
    )
    result = assemble(excerpts=(excerpt(1, 2),), diagnostics=found, repo=repo, settings=Settings())
    assert result.text.endswith(
        "\nCoverage: unavailable 1 (truncated: 'send': more than 40 hits, kept the first 40); "
        "excluded 1 (big.py: larger than 1048576 bytes); recall is not exhaustive.\n"
    )
    assert result.diagnostics == found


def test_the_byte_and_reference_budgets_bind_like_the_token_cap(repo: Repo) -> None:
    excerpts = (excerpt(1, 3), excerpt(2, 3), excerpt(3, 3))
    two = HEADER + entry_text(repo, excerpts[0]) + entry_text(repo, excerpts[1])
    by_bytes = assemble(excerpts=excerpts, diagnostics=(), repo=repo,
                        settings=Settings(max_block_bytes=len(two.encode()) + 60))
    assert [e.included for e in by_bytes.entries] == [True, True, False]
    assert by_bytes.diagnostics[0].reason == "byte budget"
    assert len(by_bytes.text.encode()) <= len(two.encode()) + 60
    heading = len(entry_text(repo, excerpts[0]).splitlines()[0].encode()) + 1
    by_refs = assemble(excerpts=excerpts, diagnostics=(), repo=repo,
                       settings=Settings(max_reference_bytes=heading))
    assert [e.included for e in by_refs.entries] == [True, False, False]
    assert {d.reason for d in by_refs.diagnostics} == {"references budget"}


def test_compact_profile_skips_what_breaks_its_line_budget(repo: Repo) -> None:
    long_one, short, shorter = excerpt(1, 12), excerpt(2, 6), excerpt(3, 4)
    result = assemble(excerpts=(long_one, short, shorter), diagnostics=(), repo=repo,
                      settings=Settings.compact())
    # 12 lines alone break the 10-line budget; 6 fit, then 4 more make exactly 10.
    assert [e.included for e in result.entries] == [False, True, True]
    assert result.diagnostics == (
        Diagnostic("omitted", "line budget", "pkg/m1.py", "pkg.m1.f1"),
    )


def test_budget_smaller_than_the_header(repo: Repo) -> None:
    result = assemble(excerpts=(excerpt(1, 2),), diagnostics=(), repo=repo,
                      settings=Settings(budget_tokens=5))
    assert (result.text, result.tokens) == ("", 0)
    assert [e.included for e in result.entries] == [False]
    assert len(result.diagnostics) == 1


def test_no_excerpts(repo: Repo) -> None:
    result = assemble(excerpts=(), diagnostics=(), repo=repo, settings=Settings())
    assert (result.text, result.entries, result.diagnostics) == (HEADER + NOTHING_CUT, (), ())


def test_called_through_the_hook_with_every_argument(repo: Repo) -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(assemble_stage)
    query = Query("t", (), (), (), (), (), "t")
    first = excerpt(1, 2)
    result = pm.hook.assemble(
        query=query, excerpts=(first,), diagnostics=(), repo=repo, settings=Settings()
    )
    assert result.text == HEADER + entry_text(repo, first) + NOTHING_CUT


def test_an_entry_that_leaves_no_room_for_its_own_coverage_line_is_omitted(repo: Repo) -> None:
    # Found by the thorough property run: the room kept for the closing line
    # was that of every excerpt omitted ("omitted 1", 37 bytes), but showing
    # the entry closes with "nothing cut" (39 bytes). Two bytes short, the
    # entry used to vanish from the slice with no omission recorded.
    item = excerpt(1, 3)
    body = HEADER + entry_text(repo, item)
    omitted_line = "Coverage: omitted 1; not exhaustive.\n"
    cap = len((body + omitted_line).encode())
    result = assemble(excerpts=(item,), diagnostics=(), repo=repo,
                      settings=Settings(max_block_bytes=cap))
    assert [e.included for e in result.entries] == [False]
    assert result.diagnostics == (Diagnostic("omitted", "byte budget", "pkg/m1.py", "pkg.m1.f1"),)
    assert result.text == (
        HEADER + "Coverage: omitted 1 (pkg/m1.py: byte budget); recall is not exhaustive.\n"
    )
