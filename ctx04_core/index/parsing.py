"""Reading and parsing the files a refresh must look at, each into the rows the index stores.

A file is read (a regular file within the size limit) and keyed, and parsed
by the enabled ``parse_file`` hook unless its key shows its stored row was
made from these very bytes. Many files are parsed in forked worker
processes (:mod:`ctx04_core.index.workers`), whose answers are awaited with
a deadline.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from collections.abc import Generator
from dataclasses import dataclass

import pluggy

from ctx04_core.index.opening import IndexUnavailable
from ctx04_core.index.statuses import (
    BINARY,
    NO_PARSER,
    NOT_UTF8,
    OK,
    PARTIAL,
    REFUSED,
    SYNTAX_ERROR,
    TOO_COMPLEX,
    TOO_LARGE,
    UNREADABLE,
)
from ctx04_core.index.workers import WorkerFailed, forked_map
from ctx04_core.parse_budget import TooComplex
from ctx04_core.regular_file import FileTooLarge, NotRegularFile, read_regular_file
from ctx04_core.settings import Settings
from ctx04_core.text import source_text, split_lines, tokenize
from ctx04_core.types import MODULE, Node, NodeValues, ParsedFile

# A refresh that reads at least this many files parses them in forked worker
# processes (one per CPU), this many files to a task, at most two windows of
# files in flight; fewer are parsed in the process itself.
PARALLEL_MIN_FILES = 256
PARALLEL_CHUNK = 16
PARALLEL_WINDOW = 1024
_FORK = "fork" in multiprocessing.get_all_start_methods()
# A worker's answer (PARALLEL_CHUNK files read and parsed) that has not come
# within this long means the worker is stuck: the refresh fails with one
# line rather than wait for ever, and the workers are killed.
WORKER_ANSWER_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Outcome:
    """What reading and parsing one file gave."""

    key: str
    status: str
    message: str = ""
    rows: Rows | None = None  # of a file parsed in whole or in part


@dataclass(frozen=True)
class Rows:
    """A parsed file as the index stores it, in plain tuples: a worker process
    sends them back far more cheaply than the parser's dataclasses."""

    language: str
    statements: str  # the multiline statements, as JSON
    # Per node: qualname, name, kind, start, end, header_end, signature, docstring.
    nodes: tuple[tuple[str, str, str, int, int, int, str, str], ...]
    # Per node: the terms of its description ("" for a module) and of its own code.
    terms: tuple[tuple[str, str], ...]
    # Per edge: the index of its node in ``nodes``, kind, target, target's last name, line.
    edges: tuple[tuple[int, str, str, str, int], ...]
    # What plugins derived from its nodes (``node_values``): node index, key, value.
    values: tuple[tuple[int, str, bytes], ...] = ()


def _lines_by_innermost(nodes: tuple[Node, ...], n_lines: int) -> dict[Node, list[int]]:
    """The file's lines partitioned by their innermost node.

    Not a node's own lines (``stages.regions.node_own_lines``): a function
    owns the lines of a function nested in it, but the code search must
    index each line's words once, under the definition that holds it most
    closely. Larger spans are laid down first and nested ones overwrite them.
    """
    owner: list[Node | None] = [None] * (n_lines + 1)
    for node in sorted(nodes, key=lambda n: n.span.start_line - n.span.end_line):
        last = min(node.span.end_line, n_lines)
        owner[node.span.start_line : last + 1] = [node] * max(0, last - node.span.start_line + 1)
    owned: dict[Node, list[int]] = {}
    for number in range(1, n_lines + 1):
        holder = owner[number]
        if holder is not None:
            owned.setdefault(holder, []).append(number)
    return owned


def _read_file(
    top: str, rel: str, known_key: str, pm: pluggy.PluginManager, settings: Settings
) -> Outcome:
    """Read, key and (unless its key is ``known_key``) parse one file."""
    try:
        data = read_regular_file(top + rel, settings.max_file_bytes)
    except NotRegularFile as refused:
        # Listed as a file, replaced since (by a FIFO, a folder, a link).
        return Outcome("", REFUSED, str(refused))
    except FileTooLarge as large:
        return Outcome("", TOO_LARGE, too_large(large.size, settings))
    except OSError as err:
        return Outcome("", UNREADABLE, reason(err))
    key = hashlib.sha256(data + rel.encode("utf-8")).hexdigest()
    if key == known_key:
        return Outcome(key, OK)  # the bytes the row was made from: nothing to parse
    return _parse(rel, data, key, pm, settings)


def _parse(
    rel: str, data: bytes, key: str, pm: pluggy.PluginManager, settings: Settings
) -> Outcome:
    if b"\0" in data:
        return Outcome(key, BINARY, "contains a NUL byte")
    try:
        text = source_text(data)
    except UnicodeDecodeError as err:
        return Outcome(key, NOT_UTF8, f"invalid UTF-8 at byte {err.start}")
    try:
        parsed: ParsedFile | None = pm.hook.parse_file(path=rel, text=text, settings=settings)
    except TooComplex as err:
        return Outcome(key, TOO_COMPLEX, str(err))
    except SyntaxError as err:
        return Outcome(key, SYNTAX_ERROR, f"line {err.lineno}: {err.msg}")
    if parsed is None:
        return Outcome(key, NO_PARSER, "no enabled plugin parses this file")
    status, message = OK, ""
    if parsed.error_lines:
        status = PARTIAL
        where = ", ".join(map(str, parsed.error_lines))
        message = f"indexed around code that does not parse at line(s) {where}"
    lines = split_lines(text)
    derived = pm.hook.node_values(path=rel, lines=lines, parsed=parsed, settings=settings)
    return Outcome(key, status, message, _rows(parsed, lines, derived))


def _rows(
    parsed: ParsedFile, lines: tuple[str, ...], derived: list[list[NodeValues]]
) -> Rows:
    owned = _lines_by_innermost(parsed.nodes, len(lines))
    nodes, terms = [], []
    by_qualname: dict[str, list[tuple[int, int, int]]] = {}
    for at, node in enumerate(parsed.nodes):
        start, end = node.span.start_line, node.span.end_line
        by_qualname.setdefault(node.qualname, []).append((end - start, start, at))
        nodes.append((node.qualname, node.name, node.kind, start, end, node.header_end,
                      node.signature, node.docstring))
        description = "" if node.kind == MODULE else f"{node.signature} {node.docstring}"
        code = "\n".join(lines[n - 1] for n in owned.get(node, ()))
        terms.append((" ".join(tokenize(description)), " ".join(tokenize(code))))
    edges = []
    for edge in parsed.edges:
        same_name = by_qualname.get(edge.source)
        if not same_name:
            continue
        # Definitions sharing a qualname are told apart by which one holds the line.
        holding = [c for c in same_name if c[1] <= edge.line <= c[1] + c[0]]
        edges.append((min(holding or same_name)[2], edge.kind, edge.target,
                      edge.target.rsplit(".", 1)[-1], edge.line))
    values = tuple(
        (at, found.key, value)
        for per_plugin in derived for found in per_plugin
        for at, value in enumerate(found.values) if value is not None
    )
    return Rows(parsed.language, json.dumps(parsed.multiline_statements), tuple(nodes),
                 tuple(terms), tuple(edges), values)


def read_files(
    top: str, jobs: list[tuple[str, str]], pm: pluggy.PluginManager, settings: Settings
) -> Generator[Outcome, None, None]:
    """:func:`_read_file` of each (path, known key), in order: in worker processes
    when there are enough files to be worth starting them, else here.

    Workers are forked, so they parse with this very plugin manager (plugins
    registered in-process included), and share nothing else with this process
    (:mod:`ctx04_core.index.workers`). At most two windows of files are in
    flight, so a writer slower than the workers never holds every result.
    """
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if len(jobs) < PARALLEL_MIN_FILES or workers < 2 or not _FORK:
        for rel, known_key in jobs:
            yield _read_file(top, rel, known_key, pm, settings)
        return
    chunks = [jobs[at : at + PARALLEL_CHUNK] for at in range(0, len(jobs), PARALLEL_CHUNK)]

    def read_chunk(chunk: list[tuple[str, str]]) -> list[Outcome]:
        return [_read_file(top, rel, known_key, pm, settings) for rel, known_key in chunk]

    try:
        for outcomes in forked_map(read_chunk, chunks, workers, WORKER_ANSWER_TIMEOUT_S,
                                   ahead=2 * PARALLEL_WINDOW // PARALLEL_CHUNK):
            yield from outcomes
    except WorkerFailed as err:
        raise IndexUnavailable(f"a parse worker {err}; the refresh was stopped") from None


def too_large(size: int, settings: Settings) -> str:
    return f"{size} bytes, over the {settings.max_file_bytes} limit"


def reason(err: OSError) -> str:
    return err.strerror or str(err)
