"""Shared fixtures: real git repositories in temp folders, real indexes."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctx04_core.pipeline import open_repo
from ctx04_core.plugins import plugin_manager
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def make_git_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    """A real git repository with ``files`` committed once."""
    root.mkdir(parents=True, exist_ok=True)
    write_files(root, files)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", *args], cwd=root, env=GIT_ENV, check=True)
    return root


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexes go to a temp cache, never the developer's, and no plugin is disabled."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("CTX04_DISABLE", raising=False)


@pytest.fixture
def indexed() -> Iterator[Callable[..., Repo]]:
    """Open (building it) the real index of a repository: ``indexed(root, disable=())``."""
    opened: list[Repo] = []

    def open_indexed(root: Path, disable: tuple[str, ...] = (), **overrides: object) -> Repo:
        settings = Settings().with_overrides(**overrides)
        repo, _ = open_repo(root.resolve(), plugin_manager(disable=disable), settings)
        opened.append(repo)
        return repo

    yield open_indexed
    for repo in opened:
        repo.index.close()
