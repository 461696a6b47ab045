"""The repository a retrieval looks at: its root, its code index, and its files.

Each file is read once per retrieval, completely, and only if it resolves to
a regular file inside the root; every stage sees the same observed bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from ctx04_core.git import run_git
from ctx04_core.regular_file import FileTooLarge, NotRegularFile, read_regular_file
from ctx04_core.text import source_text, split_lines
from ctx04_core.types import Diagnostic

if TYPE_CHECKING:
    from ctx04_core.index import CodeIndex

# Why a file may not be read, as Repo.source says it; the index's statuses
# for the same files are worded alike (pipeline.unusable_reason).
BINARY_REASON = "binary (contains a NUL byte)"
NOT_UTF8_REASON = "not valid UTF-8"


def too_large_reason(max_bytes: int) -> str:
    return f"larger than {max_bytes} bytes"


GIT_TIMEOUT_S = 2.0
GIT_MAX_OUTPUT_BYTES = 4096


class RepoError(ValueError):
    """The repository argument cannot be used (missing, not a folder)."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    digest: str  # sha256 of the complete bytes read
    lines: tuple[str, ...]  # without line endings; lines[0] is line 1


def resolve_root(path: str | Path) -> Path:
    root = Path(path).expanduser()
    if not root.exists():
        raise RepoError(f"repository not found: {path}")
    if not root.is_dir():
        raise RepoError(f"repository is not a folder: {path}")
    return root.resolve()


def git_base(root: Path) -> tuple[str | None, Diagnostic | None]:
    """The HEAD commit, or None outside git; a diagnostic when git did not answer."""
    try:
        done = run_git(
            ["-C", str(root)], "rev-parse", "--verify", "--quiet", "HEAD",
            cwd=root, timeout_s=GIT_TIMEOUT_S, max_stdout_bytes=GIT_MAX_OUTPUT_BYTES,
        )
    except OSError as err:
        return None, Diagnostic("unavailable", f"git could not run: {err.strerror or err}")
    if done.stopped == "timeout":
        return None, Diagnostic(
            "unavailable", f"git did not answer within {GIT_TIMEOUT_S:g} s",
            detail="git rev-parse HEAD",
        )
    if done.stopped == "output_limit":
        # A cut answer is unavailable, not "no commit": say so, as for a timeout.
        return None, Diagnostic(
            "unavailable", f"git printed more than {GIT_MAX_OUTPUT_BYTES} bytes",
            detail="git rev-parse HEAD",
        )
    commit = done.stdout.decode("ascii", "replace").strip()
    if done.returncode == 0 and len(commit) == 40:
        return commit, None
    return None, None  # not a git repository, or no commit yet


class Repo:
    """What stages may read: the root, the index, and files via :meth:`source`."""

    def __init__(
        self,
        root: Path,
        index: CodeIndex,
        globs: tuple[str, ...],
        max_file_bytes: int,
        base: str | None = None,
        diagnostics: tuple[Diagnostic, ...] = (),
        excluded: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        self.root = root
        self.index = index
        self.globs = globs
        self.max_file_bytes = max_file_bytes
        self.base = base  # git HEAD when git could tell
        self._opening = diagnostics
        self._excluded = excluded
        # Files the index already found unusable (path -> reason) are refused
        # up front: they are part of what the slice cannot show.
        self._sources: dict[str, SourceFile | None] = dict.fromkeys(excluded)
        self._refused = {path: Diagnostic("excluded", why, path) for path, why in excluded.items()}

    def reopened(self) -> Repo:
        """The same repository with no file read yet: a later retrieval reads the bytes
        on disk then, not the ones this one saw."""
        return Repo(
            self.root, self.index, self.globs, self.max_file_bytes, self.base, self._opening,
            self._excluded,
        )

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """What opening the repository reported, then each refused file once."""
        return self._opening + tuple(self._refused.values())

    def source(self, path: str) -> SourceFile | None:
        """The file's lines, or None (with a diagnostic) when it may not be read."""
        if path not in self._sources:
            found = self._read(path)
            if isinstance(found, str):
                self._refused[path] = Diagnostic("excluded", found, path)
            self._sources[path] = found if isinstance(found, SourceFile) else None
        return self._sources[path]

    def _read(self, path: str) -> SourceFile | str:
        """The file, or the reason it is refused."""
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            return "outside the repository"
        try:
            data = read_regular_file(str(target), self.max_file_bytes)
        except NotRegularFile as refused:
            return str(refused)
        except FileTooLarge:
            return too_large_reason(self.max_file_bytes)
        except OSError as err:
            return f"unreadable: {err.strerror}"
        if b"\0" in data:
            return BINARY_REASON
        try:
            text = source_text(data)
        except UnicodeDecodeError:
            return NOT_UTF8_REASON
        return SourceFile(path, hashlib.sha256(data).hexdigest(), split_lines(text))
