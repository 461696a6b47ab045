"""Building or refreshing the code indexes of many repositories: ``ctx04 index --repos``.

The repo map is eval's: ``{"owner/name": path}``. A path that is a git
directory (bare, or a ``.git`` folder) is indexed at its HEAD commit,
materialised into the tree cache as eval materialises a base commit; any
other folder is indexed as it is, like ``ctx04 index --repo``. Each
repository gets its own index (under ``--index-dir``, one folder per
repository) and shares nothing with the others, so they can run on any
executor; one repository's failure is reported in its row and the rest go on.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from ctx04_core import git
from ctx04_core.bench.trees import TreeError, materialise, tree_dir
from ctx04_core.plugins import loaded_plugins
from ctx04_core.repository import resolve_root
from ctx04_core.settings import Settings

GIT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class RepoIndexed:
    """One repository's refresh, or why it failed (``error``, with the counts 0)."""

    name: str
    root: str  # the folder indexed: the repository itself or its HEAD's tree
    files: int
    parsed: int
    failed: int  # files not parsed in full
    seconds: float
    index_file: str
    error: str | None = None


def index_repository(
    entry: tuple[str, Path], index_dir: Path | None, disable: tuple[str, ...], tree_cache: Path
) -> RepoIndexed:
    """Build or refresh the index of ``entry`` = (name, path), in this process or a worker."""
    from ctx04_core.pipeline import open_repo

    name, where = entry
    root = where
    try:
        pm = loaded_plugins(disable)
        if _is_git_dir(where):
            commit = _head(where)
            root = materialise(where, commit, tree_dir(tree_cache, name, commit)).root
        root = resolve_root(root)
        own_dir = None if index_dir is None else index_dir / name.replace("/", "__")
        repo, stats = open_repo(root, pm, Settings(), own_dir)
        repo.index.close()
    # One repository's failure, whatever it is, must not end a run over thousands.
    except Exception as err:
        return RepoIndexed(name, str(root), 0, 0, 0, 0.0, "", f"{type(err).__name__}: {err}")
    return RepoIndexed(
        name, str(root), stats.files, stats.parsed, len(stats.failures), stats.seconds,
        str(repo.index.path),
    )


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _head(git_dir: Path) -> str:
    done = subprocess.run(
        git.argv([f"--git-dir={git_dir}"], "rev-parse", "--verify", "HEAD^{commit}"),
        capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
        env=git.environment(),
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise TreeError(f"no HEAD commit in {git_dir}: {lines[0] if lines else done.returncode}")
    return done.stdout.strip()
