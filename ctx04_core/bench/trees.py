"""Materialising a base commit from a local git directory into a cache of trees.

``git archive`` stops at the first blob a fetched snapshot lacks, so the tree
is written from ``git ls-tree -r -z`` and one ``git cat-file --batch``
process streaming every blob: a missing blob is skipped and recorded in a
sidecar JSON beside the tree (``<commit>.json``), submodules are skipped,
symlinks are recreated as symlinks. The tree is written into ``<commit>.tmp``
and renamed into place, so an interrupted run never leaves a half tree, and a
tree already in the cache is reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import platformdirs

from ctx04_core import git

LS_TREE_TIMEOUT_S = 120.0
LS_TREE_MAX_BYTES = 256 * 1024 * 1024
_COMMIT = re.compile(r"[0-9a-fA-F]{7,64}")


class TreeError(RuntimeError):
    """The commit cannot be materialised; the message is one line."""


@dataclass(frozen=True)
class Tree:
    root: Path
    commit: str
    missing: tuple[str, ...]  # paths whose blobs the snapshot lacks, not written
    reused: bool  # found in the cache rather than written now
    seconds: float


@dataclass(frozen=True)
class _Entry:
    mode: str
    kind: str  # blob | commit (a submodule)
    sha: str
    path: str  # repo-relative; undecodable bytes kept as surrogates (os.fsdecode)


def default_cache_dir() -> Path:
    return platformdirs.user_cache_path("ctx04") / "trees"


def tree_dir(cache_dir: Path, repo: str, commit: str) -> Path:
    """Where ``repo``'s ``commit`` lives in the cache: ``<owner>__<name>/<commit>``."""
    return cache_dir / repo.replace("/", "__") / commit


def sidecar_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".json")


def materialise(git_dir: Path, commit: str, dest: Path) -> Tree:
    """The tree of ``commit`` at ``dest``, written from ``git_dir`` unless already there."""
    started = time.perf_counter()
    if dest.is_dir():
        return Tree(dest, commit, _recorded_missing(dest), True, time.perf_counter() - started)
    if not _COMMIT.fullmatch(commit):
        raise TreeError(f"not a commit id: {commit!r}")
    if not git_dir.is_dir():
        raise TreeError(f"git directory not found: {git_dir}")
    entries = _ls_tree(git_dir, commit)
    # Per process: parallel workers may write the same tree at once.
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    for leftover in _abandoned(dest):  # what an interrupted run left
        shutil.rmtree(leftover, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        written = _write(git_dir, entries, tmp)
        record = {"commit": commit, "git_dir": str(git_dir), **written}
        sidecar = sidecar_path(dest)
        sidecar_tmp = sidecar.with_name(sidecar.name + ".tmp")
        sidecar_tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        # The sidecar goes first: a tree in place always has its record.
        os.replace(sidecar_tmp, sidecar)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not dest.is_dir():
                raise
            # Another process finished the same tree first; its copy is as good.
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Tree(dest, commit, tuple(written["missing"]), False, time.perf_counter() - started)


def _abandoned(dest: Path) -> list[Path]:
    """Half-written copies of ``dest`` whose writing process is gone."""
    found = []
    for candidate in dest.parent.glob(f"{dest.name}.tmp-*"):
        pid = candidate.name.rsplit("-", 1)[1]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            found.append(candidate)
        except PermissionError:
            pass  # alive, another user's
        else:
            if int(pid) == os.getpid():
                found.append(candidate)
    return found


def _recorded_missing(dest: Path) -> tuple[str, ...]:
    try:
        record = json.loads(sidecar_path(dest).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return ()
    return tuple(record.get("missing", ()))


def _ls_tree(git_dir: Path, commit: str) -> list[_Entry]:
    try:
        done = git.run_git(
            [f"--git-dir={git_dir}"], "ls-tree", "-r", "-z", "--full-tree", "--end-of-options",
            commit, cwd=git_dir, timeout_s=LS_TREE_TIMEOUT_S, max_stdout_bytes=LS_TREE_MAX_BYTES,
        )
    except OSError as err:
        raise TreeError(f"git could not run: {err.strerror or err}") from err
    if done.stopped is not None or done.returncode != 0:
        why = done.stopped or done.first_error_line()
        raise TreeError(f"git ls-tree {commit} in {git_dir} failed: {why}")
    entries = []
    for item in done.stdout.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, kind, sha = meta.decode("ascii").split(" ")
        entries.append(_Entry(mode, kind, sha, os.fsdecode(path)))
    return entries


def safe_path(path: str) -> bool:
    """A path that stays inside the tree (git refuses others, but a pack need not)."""
    parts = path.split("/")
    return not path.startswith("/") and all(p not in ("", ".", "..", ".git") for p in parts)


def _write(git_dir: Path, entries: list[_Entry], root: Path) -> dict[str, Any]:
    blobs = [e for e in entries if e.kind == "blob" and safe_path(e.path)]
    refused = [e.path for e in entries if e.kind == "blob" and not safe_path(e.path)]
    submodules = [e.path for e in entries if e.kind == "commit"]
    missing: list[str] = []
    files = symlinks = 0
    made: set[Path] = {root}
    # stderr goes to a file: a pipe nobody reads could fill and stall git.
    with tempfile.TemporaryFile() as errors, subprocess.Popen(
        git.argv([f"--git-dir={git_dir}"], "cat-file", "--batch"), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=errors, env=git.environment(),
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None  # both are PIPE
        # Requests are written from a thread so git never blocks on a full
        # stdout while this thread is still writing requests.
        feeder = threading.Thread(target=_feed, args=(proc.stdin, (b.sha for b in blobs)))
        feeder.start()
        try:
            for entry in blobs:
                data = _next_blob(proc.stdout, entry)
                if data is None:
                    missing.append(entry.path)
                    continue
                written_as = _write_entry(root, entry, data, made)
                if written_as is None:
                    refused.append(entry.path)
                elif written_as == "symlink":
                    symlinks += 1
                else:
                    files += 1
        except BaseException:
            proc.kill()
            raise
        finally:
            feeder.join()
        if proc.wait() != 0:
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace").strip().splitlines()
            raise TreeError(f"git cat-file failed: {message[0] if message else proc.returncode}")
    return {
        "files": files, "symlinks": symlinks, "missing": missing, "submodules": submodules,
        "refused": refused,
    }


def _write_entry(root: Path, entry: _Entry, data: bytes, made: set[Path]) -> str | None:
    """Write one blob entry below ``root``: ``"symlink"``, ``"file"``, or None
    when it would land below a link or a file, or on a path already written.

    A crafted tree may hold a link ``a`` and a file ``a/x`` (or the same
    path twice): every folder on the way is one this writer made itself
    (``made``), and the entry itself is created, never opened, so nothing
    is written through a link.
    """
    folder = root
    *parents, name = entry.path.split("/")
    for part in parents:
        folder = folder / part
        if folder in made:
            continue
        try:
            os.mkdir(folder)
        except FileExistsError:
            return None  # a link or a file an earlier entry wrote
        made.add(folder)
    target = folder / name
    try:
        if entry.mode == "120000":
            os.symlink(os.fsdecode(data), target)
            return "symlink"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return None
    with open(fd, "wb") as out:
        out.write(data)
        if entry.mode == "100755":
            os.fchmod(fd, 0o755)
    return "file"


def _feed(stdin: IO[bytes], shas: Iterable[str]) -> None:
    try:
        for sha in shas:
            stdin.write(sha.encode("ascii") + b"\n")
    except BrokenPipeError:
        return  # git died; the reader reports it
    finally:
        with contextlib.suppress(BrokenPipeError):
            stdin.close()


def _next_blob(stdout: IO[bytes], entry: _Entry) -> bytes | None:
    """The entry's blob from the batch stream, or None when the snapshot lacks it."""
    header = stdout.readline()
    if not header:
        raise TreeError(f"git cat-file stopped before {entry.path}")
    fields = header.rstrip(b"\n").split(b" ")
    if fields[-1] == b"missing":
        return None
    if len(fields) != 3:
        raise TreeError(f"unexpected git cat-file header for {entry.path}: {header[:80]!r}")
    size = int(fields[2])
    data = stdout.read(size)
    if len(data) != size or stdout.read(1) != b"\n":
        raise TreeError(f"git cat-file output cut inside {entry.path}")
    return data
