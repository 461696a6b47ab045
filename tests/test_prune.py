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
from ctx04_core.tokens import count_tokens
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


def run(
    repo: Repo, ranked: tuple[RankedCandidate, ...], **overrides: float | bool | str
) -> list[Excerpt]:
    # The line prune and the shape before issue 22; the value shape is
    # tests/test_slice_shape.py's.
    settings = Settings(slice_shape="signatures").with_overrides(**overrides)
    query = build_query(TASK, names=repo.index.names(), settings=settings)
    return prune(query=query, ranked=ranked, reserve=(), repo=repo, settings=settings)


def kept(excerpts: list[Excerpt]) -> dict[str | None, list[int]]:
    return {e.ranked.candidate.qualname: [n for n, _ in e.lines] for e in excerpts}


def test_rank_one_function_is_whole_and_the_rest_keep_their_best_lines(repo: Repo) -> None:
    # handle (rank 1) whole, 1-9 (10 is blank, the span ends at 9); lookup's
    # best line scores 0.32, under a fifth of handle's 3.65: dropped once
    # past the leaders (leader_ranks 1).
    ranked = ranked_functions(repo, "handle", "lookup", "unrelated")
    assert kept(run(repo, ranked, leader_ranks=1)) == {
        "auth.handle": [1, 2, 3, 4, 5, 6, 7, 8, 9]
    }
    # Without that floor, or among the leaders (the default, 5), lookup, a
    # neighbour of rank 2, is shown as its (decorated, multi-line) signature.
    for keeps in ({"prune_relative_floor": 0.0}, {}):
        assert kept(run(repo, ranked, **keeps)) == {
            "auth.handle": [1, 2, 3, 4, 5, 6, 7, 8, 9], "auth.lookup": [12, 13, 14, 15],
        }
    # Neighbours cut to their best lines instead: lookup adds line 17, its best
    # (and only scoring) line.
    best_lines = {"prune_relative_floor": 0.0, "neighbours_as_signatures": False}
    assert kept(run(repo, ranked, **best_lines)) == {
        "auth.handle": [1, 2, 3, 4, 5, 6, 7, 8, 9], "auth.lookup": [12, 13, 14, 15, 17],
    }
    # With none shown whole, handle too keeps only its best line 2 (3.65) and
    # its signature: the next best line scores 1.41.
    pruned = run(repo, ranked, whole_function_within=0, **best_lines)
    assert kept(pruned) == {"auth.handle": [1, 2], "auth.lookup": [12, 13, 14, 15, 17]}


def test_lines_below_the_ratio_are_cut_and_the_signature_stays(repo: Repo) -> None:
    # Goal terms: parse_token (×3), parse, token, when, the, session, is, expired.
    # handle's line scores: 2 → 3.65, 6 → 1.41, 4 → 1.17, 7 → 1.17, 3 → 0.37, rest 0,
    # so τ = 0.6 × 3.65 = 2.19 keeps line 2 only; line 1 is the signature.
    excerpts = run(repo, ranked_functions(repo, "lookup", "handle", "unrelated"),
                   prune_ratio=0.6, whole_function_within=0, prune_relative_floor=0.0,
                   neighbours_as_signatures=False)
    assert kept(excerpts) == {"auth.lookup": [12, 13, 14, 15, 17], "auth.handle": [1, 2]}
    assert excerpts[1].lines == (
        (1, "def handle(request):"),
        (2, "    token = parse_token(request)"),
    )


def test_kept_lines_widen_to_their_whole_statement(repo: Repo) -> None:
    # τ = 0.3 × 3.65 = 1.10 now keeps 4, 6 and 7; 6 and 7 sit inside check(...) on 5–8.
    excerpts = run(repo, ranked_functions(repo, "handle", "lookup", "unrelated"),
                   prune_ratio=0.3, whole_function_within=0, neighbours_as_signatures=False)
    assert kept(excerpts)["auth.handle"] == [1, 2, 4, 5, 6, 7, 8]


def test_a_statement_longer_than_the_cap_adds_only_its_first_line(repo: Repo) -> None:
    # check(...) on 5–8 is four lines: a cap of 4 still takes it whole, a cap
    # of 3 adds only its first line (5) to the kept 6 and 7; 8, ")", goes.
    ranked = ranked_functions(repo, "handle", "lookup", "unrelated")
    partial = {"prune_ratio": 0.3, "whole_function_within": 0, "neighbours_as_signatures": False}
    assert kept(run(repo, ranked, max_statement_lines=4, **partial))["auth.handle"] == [
        1, 2, 4, 5, 6, 7, 8
    ]
    assert kept(run(repo, ranked, max_statement_lines=3, **partial))["auth.handle"] == [
        1, 2, 4, 5, 6, 7
    ]


def test_multiline_decorated_signature_survives_a_pruned_body(repo: Repo) -> None:
    ranked = ranked_functions(repo, "lookup")
    [signature] = run(repo, ranked, whole_function_within=0)
    assert signature.lines == ((12, "@cached"), (13, "def lookup("), (14, "    key,"), (15, "):"))
    # lookup's only scoring line is 17 (token); 16 scores 0 and goes.
    [excerpt] = run(repo, ranked, whole_function_within=0, neighbours_as_signatures=False)
    assert excerpt.lines == (
        (12, "@cached"),
        (13, "def lookup("),
        (14, "    key,"),
        (15, "):"),
        (17, "    return refresh_token(key)"),
    )


def test_candidates_under_the_floor_are_dropped_whole(repo: Repo) -> None:
    ranked = ranked_functions(repo, "lookup", "handle", "unrelated")
    assert "auth.unrelated" not in kept(run(repo, ranked, leader_ranks=2))
    # lookup's best line scores 0.32: a floor above it drops lookup, signature and all.
    assert list(kept(run(repo, ranked, prune_floor=0.5))) == ["auth.handle"]


def test_candidates_far_under_the_best_candidate_are_dropped(repo: Repo) -> None:
    # handle's best line scores 3.65 and lookup's 0.32: past the leaders
    # (leader_ranks 1), a floor of 0.05 x 3.65 keeps lookup, 0.1 x 3.65 drops it.
    ranked = ranked_functions(repo, "handle", "lookup")
    past_leaders = {"leader_ranks": 1}
    assert list(kept(run(repo, ranked, prune_relative_floor=0.05, **past_leaders))) == [
        "auth.handle", "auth.lookup"
    ]
    assert list(kept(run(repo, ranked, prune_relative_floor=0.1, **past_leaders))) == [
        "auth.handle"
    ]
    # Among the leaders (rank 2 of leader_ranks 2) it stays, as its signature.
    assert kept(run(repo, ranked, prune_relative_floor=0.1, leader_ranks=2)) == {
        "auth.handle": [1, 2, 3, 4, 5, 6, 7, 8, 9], "auth.lookup": [12, 13, 14, 15],
    }


def test_a_run_of_lines_keeps_only_its_scoring_lines(repo: Repo) -> None:
    run_candidate = Candidate(Span("notes.txt", 1, 3), "lines", None, ("test",))
    [excerpt] = run(repo, (RankedCandidate(run_candidate, 1, 1.0),))
    assert excerpt.lines == ((2, "the session token is expired"),)



def test_the_first_ranked_candidate_stays_under_the_relative_floor(repo: Repo) -> None:
    # lookup ranks first though its best line (0.32) is under a fifth of
    # handle's (3.65): the ranking weighs more than one line, so it stays,
    # whole; handle, second, is its signature.
    ranked = ranked_functions(repo, "lookup", "handle")
    assert kept(run(repo, ranked)) == {
        "auth.lookup": [12, 13, 14, 15, 16, 17], "auth.handle": [1],
    }
    # A best line under the absolute floor drops it all the same.
    assert list(kept(run(repo, ranked, prune_floor=0.5))) == ["auth.handle"]


def test_the_best_ranked_function_is_whole_under_a_container_ranked_above_it(
    repo: Repo,
) -> None:
    module = next(n for n in repo.index.file_nodes("auth.py") if n.kind == "module")
    above = RankedCandidate(Candidate(module.span, "module", "auth", ("test",)), 1, 2.0)
    ranked = (above, *(
        RankedCandidate(r.candidate, r.rank + 1, r.score)
        for r in ranked_functions(repo, "handle", "lookup")
    ))
    # The module (rank 1) has no line of its own that scores: dropped;
    # handle, the first function within the first three ranks, is whole;
    # lookup, third, a leader under the relative floor, its signature.
    excerpts = run(repo, ranked)
    assert kept(excerpts) == {
        "auth.handle": [1, 2, 3, 4, 5, 6, 7, 8, 9], "auth.lookup": [12, 13, 14, 15],
    }
    # Only within whole_function_within: at 1, handle is a signature.
    assert kept(run(repo, ranked, whole_function_within=1))["auth.handle"] == [1]


def test_a_leading_function_too_large_to_show_whole_keeps_its_best_lines(repo: Repo) -> None:
    ranked = ranked_functions(repo, "handle", "lookup")
    body = "\n".join(AUTH.splitlines()[:9])
    assert (count_tokens(body), len(body.encode())) == (42, 197)
    # handle's 42 tokens do not fit 0.9 x 46: it shows its signature and its
    # best line (2) instead of vanishing from a slice it could not fit.
    assert kept(run(repo, ranked, budget_tokens=46))["auth.handle"] == [1, 2]
    assert kept(run(repo, ranked, budget_tokens=47))["auth.handle"] == list(range(1, 10))
    # Likewise the byte budget: 197 bytes fit 0.9 x 219, not 0.9 x 218.
    assert kept(run(repo, ranked, max_block_bytes=218))["auth.handle"] == [1, 2]
    assert kept(run(repo, ranked, max_block_bytes=219))["auth.handle"] == list(range(1, 10))
