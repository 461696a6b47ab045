"""Traceback recall: frames of an error mapped to the repository's definitions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ctx04_recall_traceback as traceback
from conftest import make_git_repo

from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.types import Recall

Indexed = Callable[..., Repo]

FILES: dict[str, str | bytes] = {
    "pkg/__init__.py": "",
    "pkg/loader.py": (
        "def load(path):\n"
        "    return parse(read(path))\n"
        "\n"
        "\n"
        "def read(path):\n"
        "    return open(path).read()\n"
        "\n"
        "\n"
        "class Config:\n"
        "    def load(self):\n"
        "        return load(self.path)\n"
    ),
    "pkg/parse.py": "def parse(text):\n    return text.split('=')[1]\n",
}

ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/home/me/app/main.py", line 3, in <module>\n'
    '  File "/venv/lib/python3.11/site-packages/pkg/loader.py", line 11, in load\n'
    '  File "/venv/lib/python3.11/site-packages/pkg/loader.py", line 2, in load\n'
    '  File "C:\\\\venv\\\\Lib\\\\site-packages\\\\pkg\\\\parse.py", line 2, in parse\n'
    "IndexError: list index out of range\n"
)


def recall(repo: Repo, task: str, error: str | None = None, **overrides: object) -> Recall:
    query = build_query(task, latest_error=error, names=repo.index.names(), settings=Settings())
    result = traceback.recall(
        query=query, repo=repo, settings=Settings().with_overrides(**overrides)
    )
    assert result is not None
    return result


def test_frames_map_to_definitions_innermost_first(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", FILES))
    result = recall(repo, "Loading a config without '=' crashes", ERROR)
    # The Windows path and the site-packages copies resolve by suffix; the
    # frame outside the repository (main.py) is dropped; two frames in
    # functions named load are told apart by their lines.
    assert [(c.qualname, c.terms) for c in result.candidates] == [
        ("pkg.parse.parse", ("parse",)),
        ("pkg.loader.load", ("load",)),
        ("pkg.loader.Config.load", ("load",)),
    ]
    assert {c.sources for c in result.candidates} == {("traceback",)}


def test_a_traceback_in_the_task_text_counts_too(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", FILES))
    result = recall(repo, "It crashes:\n" + ERROR, traceback_limit=1)
    assert [c.qualname for c in result.candidates] == ["pkg.parse.parse"]


def test_no_frames_no_candidates(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", FILES))
    query = build_query("parse is slow", names=repo.index.names(), settings=Settings())
    assert traceback.recall(query=query, repo=repo, settings=Settings()) is None


def test_repo_path_takes_the_longest_suffix_in_the_repository() -> None:
    paths = frozenset({"pkg/loader.py", "loader.py", "src/pkg/loader.py"})
    assert traceback.repo_path("/x/src/pkg/loader.py", paths) == "src/pkg/loader.py"
    assert traceback.repo_path("/venv/pkg/loader.py", paths) == "pkg/loader.py"
    assert traceback.repo_path("./loader.py", paths) == "loader.py"
    assert traceback.repo_path("/venv/other.py", paths) is None
