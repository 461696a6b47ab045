"""The history signal over real git repositories with real commits."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
from conftest import GIT_ENV, make_git_repo, write_files
from ctx04_history import (
    changed_definitions,
    cochange_scores,
    hunk_name,
    named_files,
    read_log,
    running_changelog,
)
from ctx04_history import signals as history_signals

from ctx04_core.pipeline import open_repo, retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.types import Candidate, Diagnostic, Span

FILES: dict[str, str | bytes] = {
    "dates.py": "def parse(text):\n    return text.split('-')\n",
    "render.py": "def show(value):\n    return str(value)\n",
    "both.py": "def parse_and_show(text):\n    return show(parse(text))\n",
}
TASK = "parse of week dates: the ISO week number is lost when parsing"
FILES_WITHOUT_DATES = {k: v for k, v in FILES.items() if k != "dates.py"}


def commit(root: Path, files: dict[str, str | bytes], message: str) -> str:
    write_files(root, files)
    for args in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", *args], cwd=root, env=GIT_ENV, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def git_out(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """Four commits: the fixture, then one on dates, one on render, a later one on render."""
    root = make_git_repo(tmp_path / "repo", FILES)
    shas = [
        commit(root, {"dates.py": FILES["dates.py"] + "# week\n"},
               "Parse ISO week dates (week number kept)"),
        commit(root, {"render.py": FILES["render.py"] + "# fast\n"},
               "Render values faster"),
        # Later than the base the benchmark gives below: it must stay invisible.
        commit(root, {"render.py": FILES["render.py"] + "# week\n"},
               "Fix parsing of ISO week number dates"),
    ]
    return root, shas


def signal_values(result: object) -> dict[str, float]:
    return {
        r.candidate.span.path: dict(r.signals)["history"]
        for r in result.candidates  # type: ignore[attr-defined]
    }


def test_commits_like_the_task_lift_the_files_they_changed(
    history: tuple[Path, list[str]],
) -> None:
    root, _ = history
    result = retrieve(TASK, root, disable=["pin"])
    # Both commits about ISO weeks match, one file each; the fixture commit
    # (all three files) matches nothing. Every task word is in its first
    # sentence (x3). Four messages of 7, 3, 7 and 1 terms: avgdl 4.5; in a
    # message of 7 a term found once scores 2.5 / (1 + 1.5 (0.25 + 0.75 * 7 / 4.5)).
    once = 2.5 / (1 + 1.5 * (0.25 + 0.75 * 7 / 4.5))
    twice = 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 7 / 4.5))
    rare, shared = math.log(3.5 / 1.5 + 1), math.log(2)  # in one message, in two
    # dates.py: parse, iso, week (twice), dates, number; render.py: parsing,
    # iso, week, number, dates.
    # Each file's votes are divided by the square root of the commits that
    # changed it: dates.py two (the fixture, its fix), render.py three.
    dates = (rare * once + 3 * shared * once + shared * twice) / math.sqrt(2)
    render = (rare * once + 4 * shared * once) / math.sqrt(3)
    values = signal_values(result)
    assert values == {
        "dates.py": 1.0, "render.py": pytest.approx(render / dates), "both.py": 0.0,
    }


def test_the_log_ends_at_the_given_revision(history: tuple[Path, list[str]]) -> None:
    root, shas = history
    git_dir = root / ".git"
    settings = Settings(history_git_dir=str(git_dir), history_rev=shas[1])
    log = read_log(root, settings)
    assert log.trouble is None
    assert [(c.message, c.files) for c in log.commits] == [
        ("Render values faster", ("render.py",)),
        ("Parse ISO week dates (week number kept)", ("dates.py",)),
        ("fixture", ("both.py", "dates.py", "render.py")),
    ]
    # The later commit about ISO weeks changed render.py; at the base it is unseen.
    result = retrieve(TASK, root, disable=["pin"], settings=settings)
    values = signal_values(result)
    assert values["dates.py"] == 1.0
    assert values["render.py"] == 0.0


def test_the_log_is_kept_in_the_index(history: tuple[Path, list[str]]) -> None:
    root, shas = history
    result = retrieve(TASK, root, disable=["pin"])
    from ctx04_core.index import CodeIndex

    index = CodeIndex.open(root)
    try:
        stored = index.derived(f"history:v3:{root.resolve()}:{shas[-1]}:5000")
    finally:
        index.close()
    assert stored is not None
    assert '"Fix parsing of ISO week number dates"' in stored
    # Nothing to report; the two commits about ISO weeks changed parse and show.
    assert result.recalled.get("history") == 2
    assert not [d for d in result.diagnostics if d.reason in ("no history", "shallow clone")]


def test_no_git_is_a_diagnostic(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write_files(root, FILES)
    result = retrieve(TASK, root, disable=["pin"])
    assert Diagnostic(
        "unavailable", "no history", detail="no git commit to read"
    ) in result.diagnostics
    assert set(signal_values(result).values()) == {0.0}


def test_a_shallow_clone_is_a_diagnostic(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, _ = history
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{root}", str(shallow)],
        env=GIT_ENV, check=True,
    )
    result = retrieve(TASK, shallow, disable=["pin"])
    assert Diagnostic(
        "unavailable", "shallow clone", detail="the history holds only 1 commits"
    ) in result.diagnostics
    assert signal_values(result)["render.py"] == 1.0


def test_a_clone_missing_a_blob_keeps_its_history(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", FILES)
    old_render = git_out(root, "rev-parse", "HEAD:render.py")
    # render.py moved and changed: following the rename reads both contents.
    (root / "render.py").unlink()
    moved = commit(root, {"view.py": FILES["render.py"].replace("str", "repr")},
                   "Move render to view")
    fix = commit(root, {"dates.py": FILES["dates.py"].replace("'-'", "'/'")},
                 "Parse dates with slashes")
    # As in a partial clone, or a snapshot without its largest blobs.
    (root / ".git" / "objects" / old_render[:2] / old_render[2:]).unlink()
    log = read_log(root, Settings())
    assert log.trouble is None
    assert [(c.message, sorted(c.files)) for c in log.commits] == [
        ("Parse dates with slashes", ["dates.py"]),
        ("Move render to view", ["render.py", "view.py"]),
        ("fixture", ["both.py", "dates.py", "render.py"]),
    ]
    repo, _ = open_repo(root, plugin_manager(disable=("pin",)), Settings(),
                        index_dir=tmp_path / "index")
    try:
        # git cannot show the move's diff; the fix's definitions are still read.
        assert changed_definitions(repo, Settings(), [moved, fix]) == {
            fix: (("dates.py", "parse"),),
        }
    finally:
        repo.index.close()


def test_a_revision_that_looks_like_an_option_is_refused(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", FILES)
    log = read_log(root, Settings(history_rev="--output=/tmp/x"))
    assert log.commits == ()
    assert log.trouble == Diagnostic(
        "unavailable", "no history", detail="not a revision: --output=/tmp/x"
    )


def test_files_that_change_with_the_named_ones_are_partners(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", {
        "codec.py": "def encode(data):\n    return data\n",
        "pad.py": "def pad(data):\n    return data\n",
        "wire.py": "def send(data):\n    return data\n",
    })
    commit(root, {"codec.py": "def encode(data):\n    return pad(data)\n",
                  "pad.py": "def pad(data):\n    return data  # 1\n"}, "Pad before encoding")
    commit(root, {"codec.py": "def encode(data):\n    return pad(data)  # 2\n",
                  "pad.py": "def pad(data):\n    return data  # 2\n"}, "Pad again")
    commit(root, {"codec.py": "def encode(data):\n    return pad(data)  # 3\n",
                  "wire.py": "def send(data):\n    return data  # 3\n"}, "Send encoded")
    # A sweeping commit (21 files): it counts among codec.py's changes but
    # pairs it with nothing.
    commit(root, {"codec.py": "def encode(data):\n    return pad(data)  # 4\n",
                  **{f"gen/m{i}.py": f"x = {i}\n" for i in range(20)}}, "Reformat")
    repo, _ = open_repo(root, plugin_manager(disable=("pin",)), Settings(),
                        index_dir=tmp_path / "index")
    try:
        query = build_query("encode returns the data unchanged", names=repo.index.names(),
                            settings=Settings())
        named = named_files(query, repo)
        assert named == {"codec.py"}
        # codec.py changed in 5 commits; with pad.py in 3 (the fixture, two
        # fixes), with wire.py in 2 (the fixture, one fix).
        assert cochange_scores(named, read_log(root, Settings())) == {
            "pad.py": 3 / 5, "wire.py": 2 / 5,
        }
        candidates = tuple(
            Candidate(n.span, n.kind, n.qualname, ("test",))
            for path in ("codec.py", "pad.py", "wire.py")
            for n in repo.index.file_nodes(path) if n.kind == "function"
        )
        weighted = Settings().with_overrides(cochange_weight=1.0)
        found = history_signals(query=query, candidates=candidates, repo=repo, settings=weighted)
        assert [(s.name, s.values, s.weight, s.mode) for s in found][1] == (
            "cochange", (0.0, 3 / 5, 2 / 5), 1.0, "scale",
        )
        # Weight 0, the default: no such signal at all.
        plain = history_signals(query=query, candidates=candidates, repo=repo,
                                settings=Settings())
        assert [s.name for s in plain] == ["history", "history_definition"]
    finally:
        repo.index.close()


@pytest.mark.parametrize(("header", "name"), [
    (" def week(self, text):", "week"),
    (" class Calendar(Base):", "Calendar"),
    (" func (c *Calendar) Week(text string) int {", "Week"),
    (" public static <T> List<T> weeks(Class<T> kind) {", "weeks"),
    (" int Calendar::week(const char *text)", "week"),
    (" pub fn week<'a>(text: &'a str) -> u32 {", "week"),
    (" def week", "week"),
    (" class Calendar extends Base {", "Calendar"),
    (" export const weekOf = (text: string): number => parse(text) {", "weekOf"),
    (" const isWeek: (key: string) => boolean = makeMap(", "isWeek"),
    (" if (week) {", None),
    ("", None),
])
def test_a_hunk_header_names_its_definition(header: str, name: str | None) -> None:
    assert hunk_name(header) == name


DATES = (
    "def parse(text):\n    return text.split('-')\n\n\n"
    "def _calendar(parts):\n    return parts\n"
)


def test_the_best_commits_lift_the_definitions_they_changed(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", {"dates.py": DATES, **FILES_WITHOUT_DATES})
    fixed = DATES.replace("return parts", "return parts[:3]")
    week_fix = commit(root, {"dates.py": fixed}, "Keep the ISO week number when parsing dates")
    commit(root, {"render.py": FILES["render.py"].replace("str(value)", "repr(value)")},
           "Render values as repr")
    later = commit(root, {"dates.py": fixed.replace("split('-')", "split('/')")},
                   "Keep the ISO week number when parsing dates")
    weighted = Settings().with_overrides(history_definition_weight=1.0)
    # At the second commit the later fix to parse() is not visible: only
    # _calendar, which no task word names, was changed by a commit like the task.
    at_base = weighted.with_overrides(history_git_dir=str(root / ".git"), history_rev=week_fix)
    result = retrieve(TASK, root, disable=["pin"], settings=at_base)
    values = {r.candidate.qualname: dict(r.signals)["history_definition"]
              for r in result.candidates}
    # _calendar shares no word with the task: the history recall proposed it;
    # render.show, which parse_and_show calls, the leaders' callees.
    assert values == {"dates.parse": 0.0, "both.parse_and_show": 0.0, "dates._calendar": 1.0,
                      "render.show": 0.0}
    calendar = next(r.candidate for r in result.candidates
                    if r.candidate.qualname == "dates._calendar")
    assert calendar.sources == ("history",)
    # At HEAD both fixes count, with the same message: the same score each.
    result = retrieve(TASK, root, disable=["pin"], settings=weighted)
    values = {r.candidate.qualname: dict(r.signals)["history_definition"]
              for r in result.candidates}
    assert values == {"dates.parse": 1.0, "both.parse_and_show": 0.0, "dates._calendar": 1.0,
                      "render.show": 0.0}
    from ctx04_core.index import CodeIndex

    index = CodeIndex.open(root)
    try:
        assert index.derived(f"changed:{week_fix}") == '[["dates.py", "_calendar"]]'
        assert index.derived(f"changed:{later}") == '[["dates.py", "parse"]]'
    finally:
        index.close()


def test_weight_zero_computes_no_definition_signal(history: tuple[Path, list[str]]) -> None:
    root, _ = history
    result = retrieve(TASK, root, disable=["pin"],
                      settings=Settings().with_overrides(history_definition_weight=0.0))
    assert all("history_definition" not in dict(r.signals) for r in result.candidates)
    assert all(r.candidate.sources != ("history",) for r in result.candidates)


def test_the_changelog_most_fixes_update_is_placed_as_the_fifth_file(tmp_path: Path) -> None:
    changes = "# Changes\n\n## Unreleased\n\n" + "".join(f"- entry {i}\n" for i in range(20))
    root = make_git_repo(tmp_path / "repo", {**FILES, "CHANGES.md": changes, "NOTES.md": "x\n"})
    # After the fixture (every file): three fixes with an entry, one without,
    # one to the notes alone (no code: not counted). Every fix bumps
    # package.json: changed more often, but no release notes.
    for i, (path, entry) in enumerate([("dates.py", True), ("render.py", True),
                                       ("dates.py", False), ("both.py", True)]):
        edits = {path: FILES[path] + f"# fix {i}\n", "package.json": f'{{"version": "1.{i}"}}\n'}
        if entry:
            edits["CHANGES.md"] = changes + f"- fix {i}\n"
            changes = edits["CHANGES.md"]
        commit(root, edits, f"Fix {i}")
    commit(root, {"NOTES.md": "y\n"}, "Notes")
    opened, _ = open_repo(root, plugin_manager(), Settings())
    try:
        log = read_log(root, Settings())
        # Four of the five commits that changed code changed CHANGES.md (NOTES.md:
        # one): at least 4 of 100 (CHANGELOG_COMMITS), not 5.
        head = Candidate(Span("CHANGES.md", 1, 15), "lines", None, ("changelog",))
        assert running_changelog(opened, log, 0.04) == head
        assert running_changelog(opened, log, 0.05) is None
    finally:
        opened.index.close()
    # Fewer than five files ranked: it comes last, ranks renumbered.
    result = retrieve(TASK, root, disable=["pin"], settings=Settings(changelog_share=0.04))
    assert [(r.rank, r.candidate.span.path, r.candidate.sources) for r in result.candidates][-1:] \
        == [(len(result.candidates), "CHANGES.md", ("changelog",))]
    assert [r.rank for r in result.candidates] == list(range(1, len(result.candidates) + 1))
    # Named, not shown: the slice is the one planned without it.
    assert "CHANGES.md" not in result.context.text
    off = retrieve(TASK, root, disable=["pin"],
                   settings=Settings(changelog_share=0.04, placed_file_position=0))
    assert retrieve(TASK, root, disable=["pin"]).candidates == off.candidates
    assert "CHANGES.md" not in {r.candidate.span.path for r in off.candidates}
    assert [r.candidate for r in off.candidates] == [r.candidate for r in result.candidates][:-1]
