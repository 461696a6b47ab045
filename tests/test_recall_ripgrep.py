"""Lexical recall: the real rg over real git repositories."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import ctx04_recall_ripgrep as ripgrep
import pytest
from conftest import make_git_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx04_core.plugins import plugin_manager
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Diagnostic, Query, Recall, Span

Indexed = Callable[..., Repo]


def query(
    identifiers: tuple[str, ...] = (),
    unresolved: tuple[str, ...] = (),
    error_strings: tuple[str, ...] = (),
    file_paths: tuple[str, ...] = (),
    goal_hint: str = "",
) -> Query:
    return Query(
        task_text="", identifiers=identifiers, unresolved=unresolved,
        error_strings=error_strings, test_names=(), file_paths=file_paths, goal_hint=goal_hint,
    )


def recall(repo: Repo, q: Query, settings: Settings | None = None) -> Recall:
    result = ripgrep.recall(query=q, repo=repo, settings=settings or Settings())
    assert result is not None
    return result


def hits(result: Recall) -> list[tuple[str, int, str]]:
    return [(c.span.path, c.span.start_line, c.terms[0]) for c in result.candidates]


def test_hits_are_exact_lines_in_path_order(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {
        "pkg/b.py": "from a import load_config\nx = 1\ncfg = load_config('y')\n",
        "a.py": "import os\n\ndef load_config(path):\n    return open(path)\n\nload_config('x')\n",
        "README.md": "call load_config first\n",  # not a source file: never searched
    })
    result = recall(indexed(root), query(identifiers=("load_config",)))
    assert hits(result) == [
        ("a.py", 3, "load_config"), ("a.py", 6, "load_config"),
        ("pkg/b.py", 1, "load_config"), ("pkg/b.py", 3, "load_config"),
    ]
    assert result.candidates[0] == Candidate(
        span=Span("a.py", 3, 3), kind="line", qualname=None, sources=("ripgrep",),
        terms=("load_config",), hit_lines=(3,),
    )
    assert result.source == "ripgrep"
    assert result.diagnostics == ()


def test_terms_are_fixed_strings_from_every_query_field_once(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {
        "m.py": (
            "def run(kind):\n"                               # 1
            "    raise KeyError('kind')\n"                   # 2
            "# see conf/settings.py\n"                      # 3
            "pattern = 'a.b('\n"                             # 4
            "axb = run\n"                                    # 5
        ),
    })
    q = query(
        identifiers=("run",),
        unresolved=("run", "a.b("),  # "run" again: searched once
        error_strings=("KeyError('kind')",),
        file_paths=("conf/settings.py",),
    )
    result = recall(indexed(root), q)
    # "a.b(" is literal: as a regex it would also match "axb = run".
    assert hits(result) == [
        ("m.py", 1, "run"), ("m.py", 5, "run"),
        ("m.py", 4, "a.b("),
        ("m.py", 2, "KeyError('kind')"),
        ("m.py", 3, "conf/settings.py"),
    ]


def test_more_hits_than_the_cap_keeps_the_first_in_path_order(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {
        "m2.py": "".join(f"needle_{i} = {i}\n" for i in range(20)),
        "m1.py": "".join(f"needle_{i} = {i}\n" for i in range(30)),
    })
    result = recall(indexed(root), query(identifiers=("needle",)))
    assert len(result.candidates) == 40
    assert hits(result) == (
        [("m1.py", n, "needle") for n in range(1, 31)]
        + [("m2.py", n, "needle") for n in range(1, 11)]
    )
    assert result.diagnostics == (
        Diagnostic(
            "unavailable", "truncated", detail="'needle': more than 40 hits, kept the first 40"
        ),
    )


def test_the_cap_is_a_setting_and_exactly_cap_hits_is_complete(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {"m.py": "x = 1\nx = 2\nx = 3\n"})
    repo = indexed(root)
    at_cap = recall(repo, query(identifiers=("x",)), Settings(hits_per_term=3))
    assert hits(at_cap) == [("m.py", 1, "x"), ("m.py", 2, "x"), ("m.py", 3, "x")]
    assert at_cap.diagnostics == ()
    cut = recall(repo, query(identifiers=("x",)), Settings(hits_per_term=2))
    assert hits(cut) == [("m.py", 1, "x"), ("m.py", 2, "x")]
    assert cut.diagnostics == (
        Diagnostic("unavailable", "truncated", detail="'x': more than 2 hits, kept the first 2"),
    )


def pointed(result: Recall) -> list[tuple[str, int, str, tuple[int, ...]]]:
    return [
        (c.span.path, c.span.start_line, c.terms[0], c.pointed_lines)
        for c in result.candidates if c.pointed_at
    ]


def test_a_code_the_title_names_points_at_its_few_places_outside_tests(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {
        "checks.py": (
            "def check_display(obj):\n"                      # 1
            "    return Error('bad', id='admin.E108')\n"     # 2
            "def check_other(obj):\n"                        # 3
            "    return Error('worse', id='admin.E109')\n"   # 4
        ),
        "registry.py": "CODES = ['E108', 'E109', 'W0611']\n",
        "tests/test_checks.py": "assert 'E108' in run()\n",
        "lint.py": "".join(f"MESSAGE_{i} = 'W0611'\n" for i in range(4)),
    })
    repo = indexed(root)
    title = "Error E108 does not cover some cases; W0611 either"
    result = recall(repo, query(unresolved=("E108", "E109", "W0611"), goal_hint=title))
    # E108: two lines outside tests, each pointed at; the test's hit is a hit
    # only. E109 is not in the title. W0611 is held by five lines: a word.
    assert pointed(result) == [
        ("checks.py", 2, "E108", (2,)), ("registry.py", 1, "E108", (1,)),
    ]
    assert ("tests/test_checks.py", 1, "E108") in hits(result)
    # A dotted term ending in the code names it too (auth.E003, admin.E108).
    dotted = recall(repo, query(unresolved=("admin.E108",), goal_hint=title))
    assert pointed(dotted) == [("checks.py", 2, "admin.E108", (2,))]
    # So does one qualified another way (lint::E108, Lint\E108): the last name.
    other = make_git_repo(tmp_path / "q", {"codes.py": "NAMES = {'lint::E108': 1}\n"})
    qualified = recall(indexed(other), query(unresolved=("lint::E108",), goal_hint=title))
    assert pointed(qualified) == [("codes.py", 1, "lint::E108", (1,))]
    # Below the title (a tool's pasted output) a code is a term like any other.
    quoted = recall(repo, query(unresolved=("E108",), goal_hint="Linting fails"))
    assert pointed(quoted) == []
    # A term cut at the cap may have more places past the cut: none is named.
    cut = recall(
        repo, query(unresolved=("E108",), goal_hint=title), Settings(hits_per_term=2)
    )
    assert pointed(cut) == []


def test_a_term_matching_nothing_gives_nothing_and_no_diagnostic(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {"m.py": "x = 1\n"})
    result = recall(indexed(root), query(identifiers=("absent_name",)))
    assert result == Recall("ripgrep", (), ())


def test_a_term_starting_with_a_dash_is_searched_not_parsed_as_a_flag(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {
        "cli.py": "import argparse\np = argparse.ArgumentParser()\np.add_argument('--verbose')\n",
    })
    result = recall(indexed(root), query(error_strings=("--verbose",)))
    assert hits(result) == [("cli.py", 3, "--verbose")]
    assert result.diagnostics == ()


def test_a_path_with_a_colon_parses(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {"odd:12:name.py": "x = 1\ny = token\n"})
    result = recall(indexed(root), query(identifiers=("token",)))
    assert hits(result) == [("odd:12:name.py", 2, "token")]


def test_a_path_that_is_not_utf8_round_trips(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {"m.py": "x = 1\n"})
    # Indexed first: lexical recall reads the files as they are now, not the index.
    repo = indexed(root)
    # A Latin-1 file name, as old checkouts have: not valid UTF-8.
    with open(os.fsencode(root) + b"/caf\xe9.py", "wb") as f:
        f.write(b"token = 1\n")
    result = recall(repo, query(identifiers=("token",)))
    assert hits(result) == [("caf\udce9.py", 1, "token")]
    assert os.fsencode(root / result.candidates[0].span.path).endswith(b"/caf\xe9.py")


def test_excluded_folders_are_not_searched(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {
        "src/app.py": "token = 1\n",
        "vendor/lib.py": "token = 2\n",
        "build/gen.py": "token = 3\n",
        "node_modules/x/y.py": "token = 4\n",
        "pkg/site-packages/z.py": "token = 5\n",  # only the top-level folder is excluded
        "dist/bundle.py": "token = 6\n",
        "pkg/admin/vendor/lib.py": "token = 8\n",  # other people's code at any depth
        "target/debug/gen.py": "token = 7\n",
    })
    result = recall(indexed(root), query(identifiers=("token",)))
    assert hits(result) == [("pkg/site-packages/z.py", 1, "token"), ("src/app.py", 1, "token")]


def test_exclusions_come_from_the_settings(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {"src/app.py": "token = 1\n", "gen/out.py": "token = 2\n"})
    result = recall(
        indexed(root), query(identifiers=("token",)), Settings(exclude_globs=("gen/**",))
    )
    assert hits(result) == [("src/app.py", 1, "token")]


def test_gitignored_and_hidden_files_are_not_searched(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {
        ".gitignore": "generated/\n*_pb2.py\n",
        "generated/out.py": "token = 1\n",
        "api_pb2.py": "token = 2\n",
        ".hidden/h.py": "token = 3\n",
        "app.py": "token = 4\n",
    })
    result = recall(indexed(root), query(identifiers=("token",)))
    assert hits(result) == [("app.py", 1, "token")]


def test_files_larger_than_the_read_limit_are_not_searched(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {
        "small.py": "token = 1\n",
        "large.py": "token = 2\n" + "# padding\n" * 10,
    })
    result = recall(
        indexed(root), query(identifiers=("token",)), Settings(max_file_bytes=len("token = 1\n"))
    )
    assert hits(result) == [("small.py", 1, "token")]


def test_a_search_past_the_timeout_is_killed_and_reported(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {"m.py": "token = 1\n"})
    result = recall(
        indexed(root), query(identifiers=("token", "other")), Settings(search_timeout_s=0.0)
    )
    assert result == Recall("ripgrep", (), (
        Diagnostic("unavailable", "timeout", detail="token"),
        Diagnostic("unavailable", "timeout", detail="other"),
    ))


def test_a_failed_search_is_reported_for_every_term(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {"m.py": "a = 1\nb = 2\n"})
    # An exclusion glob rg cannot parse makes the whole run fail.
    result = recall(indexed(root), query(identifiers=("a", "b")), Settings(exclude_globs=("[",)))
    assert result.candidates == ()
    assert [(d.reason, d.detail.split(":")[0]) for d in result.diagnostics] == [
        ("search_failed", "'a'"), ("search_failed", "'b'"),
    ]
    assert "glob" in result.diagnostics[0].detail


def test_a_term_spanning_lines_is_refused_and_the_others_searched(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", {"m.py": "a = 1\nb = 2\n"})
    result = recall(indexed(root), query(error_strings=("a = 1\nb = 2", "b = 2")))
    assert hits(result) == [("m.py", 2, "b = 2")]
    assert result.diagnostics == (
        Diagnostic(
            "unavailable", "search_failed",
            detail="'a = 1\\nb = 2': a line cannot contain a newline or NUL",
        ),
    )


def per_term_reference(
    root: Path, terms: list[str], globs: tuple[str, ...], settings: Settings
) -> list[tuple[str, int, str]]:
    """The spec's way: one rg run per term, the first ``hits_per_term`` hits of each."""
    found = []
    for term in terms:
        done = subprocess.run(
            ripgrep.rg_command([term], globs, settings), cwd=root, capture_output=True, check=False
        )
        out, at, kept = done.stdout, 0, 0
        # Forward: the path ends at the NUL (it may hold a newline), the text at the newline.
        while at < len(out) and kept < settings.hits_per_term:
            nul = out.index(b"\0", at)
            colon = out.index(b":", nul)
            path = out[at:nul].decode("utf-8", "surrogateescape").removeprefix("./")
            found.append((path, int(out[nul + 1 : colon]), term))
            at, kept = out.index(b"\n", colon) + 1, kept + 1
    return found


TRICKY = {
    "models.py": (
        "class Session:\r\n"                                  # CRLF lines
        "    def send(self): return Session.send(self)\r\n"
        "x = '3:send' + 'café'\n"
        + "y = '" + "z" * 5000 + " Session.send'\n"           # a long line, the term at its end
    ),
    "pkg/send.py": "from models import Session\nSession.send(s)\nsendsend = send\n",
    "pkg/café.py": "# models.py and send\n",
    "pkg/two\nlines.py": "send = 1\n",  # a newline in a path
}
TRICKY_TERMS = ["Session.send", "Session", "send", "models.py", "3:", "café", "sendsend", "absent"]


def test_one_run_for_all_terms_hits_what_one_run_per_term_hits(
    tmp_path: Path, indexed: Indexed
) -> None:
    root = make_git_repo(tmp_path / "r", TRICKY)
    repo = indexed(root)
    for cap in (1, 2, 40):
        settings = Settings(hits_per_term=cap)
        expected = per_term_reference(root, TRICKY_TERMS, repo.globs, settings)
        assert hits(recall(repo, query(identifiers=tuple(TRICKY_TERMS)), settings)) == expected
    assert ("models.py", 4, "Session.send") in expected
    assert ("pkg/two\nlines.py", 1, "send") in expected


WORDS = st.sampled_from(["ab", "ba", "a", "b", ":", "1", " ", "a.b", "é"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(
        st.lists(st.lists(WORDS, max_size=6).map("".join), min_size=1, max_size=8),
        min_size=1, max_size=3,
    ),
    terms=st.lists(st.lists(WORDS, min_size=1, max_size=3).map("".join), min_size=1, max_size=5,
                   unique=True),
    cap=st.integers(1, 4),
)
def test_attribution_matches_per_term_runs_on_any_text(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[str]], terms: list[str], cap: int
) -> None:
    root = tmp_path_factory.mktemp("r")
    for number, lines in enumerate(files):
        (root / f"f{number}.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings_ = Settings(hits_per_term=cap)
    found, _ = ripgrep.search(root, terms, ("*.py",), settings_)
    attributed = [(path, line, term) for term in terms for path, line in found[term][:cap]]
    assert attributed == per_term_reference(root, terms, ("*.py",), settings_)


def test_nothing_to_search_contributes_nothing(tmp_path: Path, indexed: Indexed) -> None:
    root = make_git_repo(tmp_path / "r", {"m.py": "token = 1\n"})
    assert ripgrep.recall(query=query(), repo=indexed(root), settings=Settings()) is None
    # With the parser plugins disabled there are no source globs, so no source files.
    pm = plugin_manager()
    parsers = tuple(pm.get_name(impl.plugin) for impl in pm.hook.source_globs.get_hookimpls())
    no_parser = indexed(root, disable=parsers)
    assert no_parser.globs == ()
    assert (
        ripgrep.recall(query=query(identifiers=("token",)), repo=no_parser, settings=Settings())
        is None
    )


def test_terms_still_short_after_much_output_are_searched_again_alone(
    tmp_path: Path, indexed: Indexed
) -> None:
    # 6 MB of lines holding the common term before the one line holding the
    # rare one: the first run stops past SEPARATE_AFTER_BYTES and the rare
    # term is searched on its own; the hits are those of one run per term.
    line = "common = 1  # " + "x" * 100 + "\n"
    bulk = line * (6 * 1024 * 1024 // len(line) // 20 + 1)
    files = {f"a/m{i:02}.py": bulk for i in range(20)}
    root = make_git_repo(tmp_path / "r", {**files, "z/rare.py": "rare_name = common\n"})
    repo = indexed(root)
    assert sum(len(v) for v in files.values()) > ripgrep.SEPARATE_AFTER_BYTES
    settings = Settings(hits_per_term=3)
    result = recall(repo, query(identifiers=("common", "rare_name")), settings)
    assert hits(result) == [
        ("a/m00.py", 1, "common"), ("a/m00.py", 2, "common"), ("a/m00.py", 3, "common"),
        ("z/rare.py", 1, "rare_name"),
    ]
    assert hits(result) == per_term_reference(root, ["common", "rare_name"], repo.globs, settings)
    assert result.diagnostics == (Diagnostic(
        "unavailable", "truncated", detail="'common': more than 3 hits, kept the first 3",
    ),)
