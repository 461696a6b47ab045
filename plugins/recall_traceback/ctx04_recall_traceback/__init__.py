"""Traceback recall: the definitions on the stack of an error the task shows.

A frame such as ``File "/venv/site-packages/pkg/mod.py", line 12, in load``
names a file and a function where the failure passed. The frame's path is
matched to a repository file by its longest suffix (installed copies and
other machines' checkouts put the package under another root), and the
frame's function to the definition of that name in the file, or else to
the innermost definition holding the line (the reporter's line numbers may
come from another version).

Frames are read from the latest error, then the task text; the frame
nearest the failure (the last) comes first. Cap: at most
``settings.traceback_limit`` definitions.
"""

from __future__ import annotations

import re

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Node, Query, Recall

SOURCE = "traceback"
PYTHON_FRAME = re.compile(r'File "([^"\n]+)", line (\d+), in ([^\s<>]+|<[^>\s]+>)')


def frames(text: str) -> list[tuple[str, int, str]]:
    """(path, line, function) of each Python frame in ``text``, innermost first."""
    found = [(m.group(1), int(m.group(2)), m.group(3)) for m in PYTHON_FRAME.finditer(text)]
    return found[::-1]


def repo_path(frame_path: str, paths: frozenset[str]) -> str | None:
    """The repository file whose path is the longest suffix of ``frame_path``."""
    parts = [p for p in frame_path.replace("\\", "/").split("/") if p not in ("", ".")]
    for start in range(len(parts)):
        candidate = "/".join(parts[start:])
        if candidate in paths:
            return candidate
    return None


def frame_node(repo: Repo, path: str, line: int, function: str) -> Node | None:
    named = [n for n in repo.index.file_nodes(path) if n.name == function and n.kind != "module"]
    holding = [n for n in named if n.span.start_line <= line <= n.span.end_line]
    if holding or len(named) == 1:
        return (holding or named)[0]
    return repo.index.innermost(path, line)


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    stack = frames(query.latest_error) + frames(query.task_text)
    if not stack:
        return None
    paths = repo.index.paths()
    seen: set[tuple[str, int]] = set()
    candidates: list[Candidate] = []
    for frame_path, line, function in stack:
        path = repo_path(frame_path, paths)
        node = frame_node(repo, path, line, function) if path else None
        if node is None or (node.span.path, node.span.start_line) in seen:
            continue
        seen.add((node.span.path, node.span.start_line))
        candidates.append(Candidate(
            span=node.span, kind=node.kind, qualname=node.qualname, sources=(SOURCE,),
            terms=(function,),
        ))
        if len(candidates) == settings.traceback_limit:
            break
    return Recall(source=SOURCE, candidates=tuple(candidates))
