"""Structure-aware dedup and merge (spec §3.3) against a real index."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import make_git_repo

from ctx04_core.repository import Repo
from ctx04_core.stages.merge import merge
from ctx04_core.types import Candidate, Span

STORE = """\
import os

LIMIT = 3


class MemStore:
    kind = "note"

    def remember(self, text, kind=None):
        value = compute(
            text,
            kind,
        )
        return value

    def recall(self):
        return []


def helper():
    return LIMIT
"""
# Every line after the first two a syntax error too: too little parses to index it in part.
BROKEN = "def broken(:\n    pass\nx = = 1\ny = = 2\nz = = 3\nw = = 4\n"
STORE_PATH = "pkg/store.py"
REMEMBER = "pkg.store.MemStore.remember"


@pytest.fixture
def repo(tmp_path: Path, indexed: Callable[..., Repo]) -> Repo:
    root = make_git_repo(
        tmp_path / "repo", {"pkg/__init__.py": "", STORE_PATH: STORE, "conf/broken.py": BROKEN}
    )
    return indexed(root)


def hit(line: int, term: str, source: str = "ripgrep", path: str = STORE_PATH) -> Candidate:
    return Candidate(Span(path, line, line), "line", None, (source,), (term,), (line,))


def test_body_hit_and_definition_collapse_into_one_entry(repo: Repo) -> None:
    definition = Candidate(
        Span(STORE_PATH, 9, 14), "method", REMEMBER, ("api-desc",), recall_score=2.5,
        pointed_at=True, pointed_lines=(13,),
    )
    frame = replace(definition, sources=("traceback",), pointed_lines=(12, 13))
    assert merge([hit(11, "text"), definition, frame], repo) == (
        Candidate(
            Span(STORE_PATH, 9, 14),
            "method",
            REMEMBER,
            ("api-desc", "ripgrep", "traceback"),  # sorted: hook order is the installation's
            ("text",),
            (11,),
            2.5,
            True,
            (12, 13),
        ),
    )


def test_hits_are_absorbed_by_the_innermost_definition(repo: Repo) -> None:
    merged = merge([hit(21, "LIMIT"), hit(7, "kind"), hit(3, "LIMIT"), hit(12, "kind")], repo)
    assert [(c.kind, c.qualname, c.span, c.hit_lines) for c in merged] == [
        ("module", "pkg.store", Span(STORE_PATH, 1, 21), (3,)),
        ("class", "pkg.store.MemStore", Span(STORE_PATH, 6, 17), (7,)),
        ("method", REMEMBER, Span(STORE_PATH, 9, 14), (12,)),
        ("function", "pkg.store.helper", Span(STORE_PATH, 20, 21), (21,)),
    ]


def test_same_line_hits_are_one(repo: Repo) -> None:
    merged = merge(
        [hit(11, "text"), hit(11, "text", source="other"), hit(12, "kind"), hit(11, "text")],
        repo,
    )
    assert merged == (
        Candidate(
            Span(STORE_PATH, 9, 14),
            "method",
            REMEMBER,
            ("other", "ripgrep"),
            ("kind", "text"),
            (11, 12),
        ),
    )


def test_unparsed_file_runs_merge_to_their_union(repo: Repo) -> None:
    path = "conf/broken.py"
    run = Candidate(Span(path, 4, 5), "lines", None, ("other",), ("z",), (5,))
    merged = merge(
        [hit(4, "y", path=path), hit(1, "d", path=path), run, hit(3, "x", path=path)], repo
    )
    assert merged == (
        Candidate(Span(path, 1, 1), "lines", None, ("ripgrep",), ("d",), (1,)),
        Candidate(
            Span(path, 3, 5), "lines", None, ("other", "ripgrep"), ("x", "y", "z"), (3, 4, 5)
        ),
    )


def test_no_merged_span_cuts_a_statement(repo: Repo) -> None:
    merged = merge([hit(line, "t") for line in range(1, 22)], repo)
    statements = repo.index.multiline_statements(STORE_PATH)
    assert (10, 13) in statements
    for candidate in merged:
        span = candidate.span
        for first, last in statements:
            inside = span.start_line <= first and last <= span.end_line
            outside = last < span.start_line or span.end_line < first
            assert inside or outside, (candidate.qualname, first, last)


def test_output_is_sorted_and_order_independent(repo: Repo) -> None:
    hits = [hit(21, "a"), hit(3, "b"), hit(16, "c"), hit(11, "d")]
    forward, backward = merge(hits, repo), merge(hits[::-1], repo)
    assert (
        [c.span for c in forward]
        == [c.span for c in backward]
        == [
            Span(STORE_PATH, 1, 21),
            Span(STORE_PATH, 9, 14),
            Span(STORE_PATH, 16, 17),
            Span(STORE_PATH, 20, 21),
        ]
    )


def test_nothing_recalled(repo: Repo) -> None:
    assert merge([], repo) == ()


DOCUMENTED_RUBY = """\
module Faker
  class Internet
    ##
    # Returns a username.
    #
    # @example
    #   Faker::Internet.username(specifier: 10)
    def username(specifier: nil)
      # the name's words, shuffled
      specifier.split
    end

    # Shared between the generators.

    def email(name: nil)
      name
    end
  end
end
"""
DOCUMENTED_C = """\
#define LIMIT 3
/* Counts the words. */
int count(const char *text) {
  return LIMIT;
}
"""
DOCUMENTED_PYTHON = """\
CACHE = {}
# Looked up before the disk.
def cached(key):
    return CACHE[key]
"""


FAKER = "lib.internet.Faker.Internet"
USERNAME = f"{FAKER}.username"


@pytest.fixture
def documented(tmp_path: Path, indexed: Callable[..., Repo]) -> Repo:
    files = {
        "lib/internet.rb": DOCUMENTED_RUBY,
        "src/count.c": DOCUMENTED_C,
        "tools/cache.py": DOCUMENTED_PYTHON,
    }
    return indexed(make_git_repo(tmp_path / "repo", files))


@pytest.mark.parametrize(
    ("path", "line", "placed"),
    [
        # The method's doc comment and its example speak of the method; the
        # class, which holds the lines, stays a candidate by them.
        ("lib/internet.rb", 7, [("class", FAKER, (2, 18)), ("method", USERNAME, (8, 11))]),
        ("lib/internet.rb", 3, [("class", FAKER, (2, 18)), ("method", USERNAME, (8, 11))]),
        # A comment in a body is the body's; one a blank line away documents nothing.
        ("lib/internet.rb", 9, [("method", USERNAME, (8, 11))]),
        ("lib/internet.rb", 13, [("class", FAKER, (2, 18))]),
        # A C preprocessor line is no comment; a C comment documents.
        ("src/count.c", 1, [("module", "src.count", (1, 5))]),
        ("src/count.c", 2, [("module", "src.count", (1, 5)),
                            ("function", "src.count.count", (3, 5))]),
        ("tools/cache.py", 2, [("module", "tools.cache", (1, 4)),
                               ("function", "tools.cache.cached", (3, 4))]),
        ("tools/cache.py", 1, [("module", "tools.cache", (1, 4))]),
    ],
)
def test_a_comment_directly_above_a_definition_is_the_definitions(
    documented: Repo, path: str, line: int, placed: list[tuple[str, str, tuple[int, int]]]
) -> None:
    assert merge([hit(line, "term", path=path)], documented) == tuple(
        Candidate(Span(path, *span), kind, qualname, ("ripgrep",), ("term",), (line,))
        for kind, qualname, span in placed
    )


def test_a_container_with_hits_of_its_own_leaves_its_members_doc_comments_to_them(
    documented: Repo,
) -> None:
    path = "lib/internet.rb"
    merged = merge([hit(7, "username", path=path), hit(13, "Shared", path=path)], documented)
    assert [(c.qualname, c.terms, c.hit_lines) for c in merged] == [
        (FAKER, ("Shared",), (13,)),
        (USERNAME, ("username",), (7,)),
    ]
