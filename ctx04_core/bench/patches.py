"""A model's answer made into a patch: its edits, a unified diff, and git's check that it applies.

The model is asked for search/replace blocks (:data:`FORMAT`); a unified
diff is accepted too. Either way the answer is read as a list of edits
(a file, the exact text to find, the text to put there), the edits are
made in memory on the base tree's files, and the diff is computed from
the files' old and new text, so a model's wrong hunk counts or line
numbers do not matter, and what is written is always a diff of the tree.
The model's text is untrusted: nothing is written but one temporary file
(the diff, for ``git apply --check``); a path that is absolute, holds
``..``, ``.git`` or an empty part, or leads through a link out of the tree
is refused; a file is read only if it is a regular file inside the tree.

Outcomes other than a diff raise :class:`PatchRefused`, whose ``kind`` says
which: ``no_patch`` (the answer holds no edit), ``unsafe_path``,
``does_not_apply`` (a SEARCH text that is not in its file, a file to create
that exists, ``git apply --check`` refusing the diff).
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ctx04_core import git
from ctx04_core.bench.trees import safe_path
from ctx04_core.diff import hunk_header
from ctx04_core.regular_file import FileTooLarge, NotRegularFile, read_regular_file
from ctx04_core.subprocesses import run_bounded

NO_PATCH = "no_patch"
UNSAFE_PATH = "unsafe_path"
DOES_NOT_APPLY = "does_not_apply"

APPLY_TIMEOUT_S = 60.0
APPLY_MAX_OUTPUT_BYTES = 64 * 1024
MAX_FILE_BYTES = 4 * 1024 * 1024  # a file an edit may change

# What the model is told about the answer's form.
FORMAT = """\
Answer with the edits that fix the issue, as search/replace blocks, one per edit:

path/to/file.py
<<<<<<< SEARCH
the exact lines to change, copied from the file, with their indentation
=======
the lines that replace them
>>>>>>> REPLACE

The line before each block is the file's path from the repository root. A SEARCH part
must match the file's current text exactly (a block applies after the ones before it)
and should be long enough to be unique. An empty SEARCH part creates a new file.
A unified diff (--- a/PATH, +++ b/PATH, @@ hunks) in a ```diff fence is accepted too."""

_SEARCH = re.compile(r"<{5,9} ?SEARCH\s*")
_DIVIDER = re.compile(r"={5,9}\s*")
_REPLACE = re.compile(r">{5,9} ?REPLACE\s*")
_FENCE = re.compile(r"\s*(```|~~~)")


class PatchRefused(ValueError):
    """The answer gives no patch that can be written; ``kind`` says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Edit:
    path: str  # from the repository root, forward slashes
    search: str  # "" with create: the whole new file
    replace: str
    create: bool = False  # a new file (an empty SEARCH, or a diff from /dev/null)
    after_line: int | None = None  # a diff's insertion with no context: after this old line


@dataclass(frozen=True)
class Patch:
    diff: str  # a unified diff with a/ and b/ prefixes, as git writes it
    files: tuple[str, ...]  # the files it changes, in the order first edited


def parse_edits(answer: str) -> list[Edit]:
    """The edits in the model's answer: its search/replace blocks, else its unified diff."""
    lines = answer.splitlines()
    edits = list(_blocks(lines)) or list(_diff_edits(lines))
    if not edits:
        raise PatchRefused(NO_PATCH, "the answer holds no search/replace block and no diff")
    return edits


def extract_patch(answer: str, tree: Path, timeout_s: float = APPLY_TIMEOUT_S) -> Patch:
    """The answer's edits made on ``tree``'s files as a unified diff that git applies there."""
    root = tree.resolve()
    changed: dict[str, tuple[str | None, str]] = {}  # path -> (old text or None, new text)
    for number, edit in enumerate(parse_edits(answer), 1):
        _check_path(edit.path)
        if edit.path in changed:
            old, current = changed[edit.path]
        else:
            old = _read(root, edit.path)
            current = "" if old is None else old
        changed[edit.path] = (old, _apply(edit, number, old is None and edit.path not in changed,
                                          current))
    diff = "".join(_file_diff(path, old, new) for path, (old, new) in changed.items()
                   if old is None or old != new)
    if not diff:
        raise PatchRefused(NO_PATCH, "the edits change nothing")
    check_applies(diff, root, timeout_s)
    return Patch(diff, tuple(p for p, (old, new) in changed.items() if old is None or old != new))


def check_applies(diff: str, tree: Path, timeout_s: float = APPLY_TIMEOUT_S) -> None:
    """``git apply --check`` of ``diff`` in ``tree`` (a folder without .git); raises
    PatchRefused when git refuses it or does not answer in time."""
    with tempfile.TemporaryDirectory(prefix="ctx04-patch-") as folder:
        patch_file = Path(folder) / "model.diff"
        patch_file.write_text(diff, encoding="utf-8")
        env = git.environment()
        # The tree is no repository: git must not find one above it (a cache
        # folder inside a clone), where it would apply paths relative to that.
        env["GIT_CEILING_DIRECTORIES"] = str(tree.parent)
        try:
            done = run_bounded(
                git.argv(["-C", str(tree)], "apply", "--check", "--", str(patch_file)),
                cwd=tree, timeout_s=timeout_s, max_stdout_bytes=APPLY_MAX_OUTPUT_BYTES, env=env,
            )
        except OSError as err:
            raise PatchRefused(DOES_NOT_APPLY, f"git could not run: {err.strerror or err}") from err
    if done.stopped is not None:
        raise PatchRefused(DOES_NOT_APPLY, f"git apply --check stopped: {done.stopped}")
    if done.returncode != 0:
        raise PatchRefused(DOES_NOT_APPLY, f"git apply --check: {done.first_error_line()}")


def _blocks(lines: list[str]) -> Iterator[Edit]:
    """The search/replace blocks, each with the path on the closest line above it."""
    index = 0
    path = ""
    while index < len(lines):
        line = lines[index]
        if not _SEARCH.fullmatch(line.strip()):
            if line.strip() and not _FENCE.match(line):
                path = line
            index += 1
            continue
        search, index = _until(lines, index + 1, _DIVIDER)
        replace, index = _until(lines, index, _REPLACE)
        name = path.strip().strip("`*#").strip().removesuffix(":").strip()
        if not name:
            raise PatchRefused(NO_PATCH, "a SEARCH block names no file on the line above it")
        yield Edit(name, search, replace, create=not search)
        path = name  # a later block with no path of its own edits the same file


def _until(lines: list[str], start: int, end: re.Pattern[str]) -> tuple[str, int]:
    """The text from ``start`` to the line ``end`` matches, and the index after that line."""
    for index in range(start, len(lines)):
        if end.fullmatch(lines[index].strip()):
            return "".join(f"{line}\n" for line in lines[start:index]), index + 1
    raise PatchRefused(NO_PATCH, "a search/replace block is not closed")


def _diff_edits(lines: list[str]) -> Iterator[Edit]:
    """A unified diff's hunks as edits: context and removed lines find, context and
    added lines replace; the counts in the hunk headers are not trusted."""
    index = 0
    old_path: str | None = None
    new_path: str | None = None
    while index < len(lines):
        line = lines[index]
        if _file_header(lines, index):
            old_path = _diff_path(line[4:])
            new_path = _diff_path(lines[index + 1][4:])
            index += 2
            if new_path is None:
                raise PatchRefused(DOES_NOT_APPLY, f"the diff deletes {old_path}: not supported")
            if old_path is not None and old_path != new_path:
                raise PatchRefused(DOES_NOT_APPLY, f"the diff renames {old_path}: not supported")
            continue
        header = hunk_header(line) if line.startswith("@@") else None
        if line.startswith("@@") and new_path is not None:
            body, index = _hunk_body(lines, index + 1)
            search = "".join(f"{text[1:]}\n" for text in body if text[:1] in (" ", "-"))
            replace = "".join(f"{text[1:]}\n" for text in body if text[:1] in (" ", "+"))
            after = header.old_start if header is not None and not search else None
            yield Edit(new_path, search, replace, create=old_path is None, after_line=after)
            continue
        index += 1


def _file_header(lines: list[str], index: int) -> bool:
    return (lines[index].startswith("--- ") and index + 1 < len(lines)
            and lines[index + 1].startswith("+++ "))


def _hunk_body(lines: list[str], start: int) -> tuple[list[str], int]:
    body: list[str] = []
    index = start
    while index < len(lines):
        line = lines[index]
        if line.startswith(("@@", "diff --git ")) or _FENCE.match(line) or _file_header(
            lines, index
        ):
            break
        if line == "":
            body.append(" ")  # a blank context line whose space was lost
        elif line[0] in " +-":
            body.append(line)
        elif line[0] != "\\":  # not "\ No newline at end of file": prose ends the hunk
            break
        index += 1
    while body and body[-1] == " ":
        body.pop()  # blank lines after the hunk are the answer's, not the file's
    return body, index


def _diff_path(name: str) -> str | None:
    name = name.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


def _check_path(path: str) -> None:
    if not safe_path(path) or "\\" in path or any(not c.isprintable() for c in path):
        raise PatchRefused(UNSAFE_PATH, f"the patch names a path outside the tree: {path!r}")


def _read(root: Path, path: str) -> str | None:
    """The tree's file ``path`` as text, or None when there is none; a path that leads
    out of the tree or to anything but a regular UTF-8 file is refused."""
    target = root / path
    if not target.resolve().is_relative_to(root) or not target.parent.resolve().is_relative_to(
        root
    ):
        raise PatchRefused(UNSAFE_PATH, f"the patch's path {path!r} leads out of the tree")
    if not os.path.lexists(target):
        return None
    try:
        data = read_regular_file(str(target), MAX_FILE_BYTES)
        return data.decode("utf-8")
    except NotRegularFile as err:
        raise PatchRefused(UNSAFE_PATH, f"{path}: {err}") from err
    except FileTooLarge as err:
        raise PatchRefused(DOES_NOT_APPLY, f"{path}: larger than {MAX_FILE_BYTES} bytes") from err
    except UnicodeDecodeError as err:
        raise PatchRefused(DOES_NOT_APPLY, f"{path}: not UTF-8") from err
    except OSError as err:
        raise PatchRefused(DOES_NOT_APPLY, f"{path}: unreadable: {err.strerror}") from err


def _apply(edit: Edit, number: int, new_file: bool, text: str) -> str:
    """``text`` with the edit made; ``new_file``: the file does not exist yet."""
    where = f"edit {number} ({edit.path})"
    if edit.create and not edit.search:
        if not new_file:
            raise PatchRefused(DOES_NOT_APPLY, f"{where} creates a file that exists")
        return edit.replace
    if new_file:
        raise PatchRefused(DOES_NOT_APPLY, f"{where}: the file is not in the tree")
    if not edit.search:
        if edit.after_line is None:
            raise PatchRefused(DOES_NOT_APPLY, f"{where} has nothing to find")
        kept = text.splitlines(keepends=True)
        if not 0 <= edit.after_line <= len(kept):
            raise PatchRefused(DOES_NOT_APPLY, f"{where} inserts past the file's end")
        return "".join(kept[:edit.after_line]) + edit.replace + "".join(kept[edit.after_line:])
    at = text.find(edit.search)
    if at < 0 and text and not text.endswith("\n"):
        # A SEARCH that ends the file is written with a newline the file lacks.
        at = (text + "\n").find(edit.search)
        if at >= 0 and at + len(edit.search) == len(text) + 1:
            return text[:at] + edit.replace.removesuffix("\n")
        at = -1
    if at < 0:
        raise PatchRefused(DOES_NOT_APPLY, f"{where}: the SEARCH text is not in the file")
    return text[:at] + edit.replace + text[at + len(edit.search):]


def _file_diff(path: str, old: str | None, new: str) -> str:
    """The git-style diff of one file from ``old`` (None: a new file) to ``new``."""
    head = f"diff --git a/{path} b/{path}\n"
    if old is None:
        head += "new file mode 100644\n"
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{path}", tofile=f"b/{path}", lineterm="",
    )
    out = [head]
    for number, line in enumerate(lines):
        # The two file headers come first; every other line not holding a line of
        # either file starts with @@ (each of those starts with a space, - or +).
        if number < 2 or line.startswith("@@"):
            out.append(line + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)
