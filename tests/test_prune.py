"""Goal-scoped line prune (spec §3.5) over a real index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_git_repo

from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.prune import prune
from ctx04_core.stages.query import build_query
from ctx04_core.types import Candidate, Excerpt, RankedCandidate, Span

AUTH = """\
def handle(request):
    token = parse_token(request)
    user = load_user(token)
    session = open_session(user)
    result = check(
        session,
        expired=True,
    )
    return result


@cached
def lookup(
    key,
):
    other = key + 1
    return refresh_token(key)


def unrelated(a):
    return a * 2


def parse_token(raw):
    return raw
"""
NOTES = "Intro\nthe session token is expired\nsee above\n"
TASK = "Fix parse_token when the session token is expired."


@pytest.fixture
def repo(tmp_path: Path, indexed: Callable[..., Repo]) -> Repo:
    return indexed(make_git_repo(tmp_path / "repo", {"auth.py": AUTH, "notes.txt": NOTES}))


def ranked_functions(repo: Repo, *names: str) -> tuple[RankedCandidate, ...]:
    nodes = {n.qualname: n for n in repo.index.file_nodes("auth.py")}
    return tuple(
        RankedCandidate(Candidate(n.span, n.kind, n.qualname, ("test",)), rank, 1.0)
        for rank, n in enumerate((nodes[f"auth.{name}"] for name in names), start=1)
    )


def run(repo: Repo, ranked: tuple[RankedCandidate, ...], **overrides: float) -> list[Excerpt]:
    settings = Settings().with_overrides(**overrides)
    query = build_query(TASK, names=repo.index.names(), settings=settings)
    return prune(query=query, ranked=ranked, repo=repo, settings=settings)


def kept(excerpts: list[Excerpt]) -> dict[str | None, list[int]]:
    return {e.ranked.candidate.qualname: [n for n, _ in e.lines] for e in excerpts}


def test_rank_one_function_is_whole_and_the_rest_keep_their_best_lines(repo: Repo) -> None:
    # Defaults: handle (rank 1) whole, 1-9 (10 is blank, the span ends at 9);
    # lookup's best line scores 0.32, under a fifth of handle's 3.65: dropped.
    ranked = ranked_functions(repo, "handle", "lookup", "unrelated")
    assert kept(run(repo, ranked)) == {"auth.handle": [1, 2, 3, 4, 5, 6, 7, 8, 9]}
    # Without that floor lookup keeps its signature and line 17, its best (and
    # only scoring) line.
    assert kept(run(repo, ranked, prune_relative_floor=0.0)) == {
        "auth.handle": [1, 2, 3, 4, 5, 6, 7, 8, 9], "auth.lookup": [12, 13, 14, 15, 17],
    }
    # With none shown whole, handle too keeps only its best line 2 (3.65) and
    # its signature: the next best line scores 1.41.
    pruned = run(repo, ranked, whole_function_ranks=0, prune_relative_floor=0.0)
    assert kept(pruned) == {"auth.handle": [1, 2], "auth.lookup": [12, 13, 14, 15, 17]}


def test_lines_below_the_ratio_are_cut_and_the_signature_stays(repo: Repo) -> None:
    # Goal terms: parse_token (×3), parse, token, when, the, session, is, expired.
    # handle's line scores: 2 → 3.65, 6 → 1.41, 4 → 1.17, 7 → 1.17, 3 → 0.37, rest 0,
    # so τ = 0.6 × 3.65 = 2.19 keeps line 2 only; line 1 is the signature.
    excerpts = run(repo, ranked_functions(repo, "lookup", "handle", "unrelated"),
                   prune_ratio=0.6, whole_function_ranks=0, prune_relative_floor=0.0)
    assert kept(excerpts) == {"auth.lookup": [12, 13, 14, 15, 17], "auth.handle": [1, 2]}
    assert excerpts[1].lines == (
        (1, "def handle(request):"),
        (2, "    token = parse_token(request)"),
    )


def test_kept_lines_widen_to_their_whole_statement(repo: Repo) -> None:
    # τ = 0.3 × 3.65 = 1.10 now keeps 4, 6 and 7; 6 and 7 sit inside check(...) on 5–8.
    excerpts = run(repo, ranked_functions(repo, "handle", "lookup", "unrelated"),
                   prune_ratio=0.3, whole_function_ranks=0)
    assert kept(excerpts)["auth.handle"] == [1, 2, 4, 5, 6, 7, 8]


def test_multiline_decorated_signature_survives_a_pruned_body(repo: Repo) -> None:
    # lookup's only scoring line is 17 (token); 16 scores 0 and goes.
    [excerpt] = run(repo, ranked_functions(repo, "lookup"), whole_function_ranks=0)
    assert excerpt.lines == (
        (12, "@cached"),
        (13, "def lookup("),
        (14, "    key,"),
        (15, "):"),
        (17, "    return refresh_token(key)"),
    )


def test_candidates_under_the_floor_are_dropped_whole(repo: Repo) -> None:
    ranked = ranked_functions(repo, "lookup", "handle", "unrelated")
    assert "auth.unrelated" not in kept(run(repo, ranked))
    # lookup's best line scores 0.32: a floor above it drops lookup, signature and all.
    assert list(kept(run(repo, ranked, prune_floor=0.5))) == ["auth.handle"]


def test_candidates_far_under_the_best_candidate_are_dropped(repo: Repo) -> None:
    # handle's best line scores 3.65 and lookup's 0.32: a floor of 0.05 x 3.65
    # keeps lookup, 0.1 x 3.65 drops it.
    ranked = ranked_functions(repo, "handle", "lookup")
    assert list(kept(run(repo, ranked, prune_relative_floor=0.05))) == [
        "auth.handle", "auth.lookup"
    ]
    assert list(kept(run(repo, ranked, prune_relative_floor=0.1))) == ["auth.handle"]


def test_a_run_of_lines_keeps_only_its_scoring_lines(repo: Repo) -> None:
    run_candidate = Candidate(Span("notes.txt", 1, 3), "lines", None, ("test",))
    [excerpt] = run(repo, (RankedCandidate(run_candidate, 1, 1.0),))
    assert excerpt.lines == ((2, "the session token is expired"),)
