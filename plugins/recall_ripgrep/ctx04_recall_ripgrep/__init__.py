"""Lexical recall (spec §3.2, source 1): the lines that contain a query term verbatim.

Terms are the query's identifiers, unresolved names, error strings and file
paths, deduplicated in first-seen order. Each term is one ripgrep run of the
spec's invocation (fixed string, the exclusion globs, the source globs), with
deliberate deviations:

- ``--sort path`` so the order, and with it the cut, is reproducible;
- ``--null`` so a path containing ``:`` (or a newline) parses safely;
- ``-e TERM`` so a term starting with ``-`` is searched, not taken as a flag;
- ``--no-config`` so a user's ``RIPGREP_CONFIG_PATH`` cannot change the result;
- ``--max-filesize`` = ``settings.max_file_bytes``: a file larger than that
  can never be shown, so its hits must not use up the cap;
- the source globs come from the enabled parser plugins (``repo.globs``),
  given as an rg file type rather than ``-g`` (a ``-g`` glob would override
  ``.gitignore`` and, given last, the exclusions), and the exclusions from
  ``settings.exclude_globs``.

Each hit becomes a one-line candidate (``kind="line"``); merge widens it to
its enclosing definition.

Caps: at most ``settings.hits_per_term`` (40) hits per term. When a term has
more, the first ones in path order are kept, ripgrep is stopped, and the
result carries ``Diagnostic(kind="unavailable", reason="truncated")``: a cut
result is never presented as complete. A run longer than
``settings.search_timeout_s`` is killed and reported with
``reason="timeout"``; the hits read before the kill are kept.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.ripgrep import RipgrepMissing, exclusion_args, glob_args, rg_binary
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Diagnostic, Query, Recall, Span

SOURCE = "ripgrep"
_READ_CHUNK = 64 * 1024
# rg's exit status when it searched without error but matched nothing.
_NO_MATCH = 1


@dataclass
class TermResult:
    """What one ripgrep run found: (path, line) hits in path order, and what went wrong."""

    hits: list[tuple[str, int]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def search_terms(query: Query) -> list[str]:
    """The query's lexical terms, each once, in first-seen order."""
    terms: dict[str, None] = {}
    for term in (*query.identifiers, *query.unresolved, *query.error_strings, *query.file_paths):
        # An empty fixed string matches every line; it says nothing about the task.
        if term:
            terms.setdefault(term, None)
    return list(terms)


def rg_command(term: str, globs: tuple[str, ...], settings: Settings) -> list[str]:
    return [
        rg_binary(), "--no-heading", "--line-number", "--color", "never", "--null",
        "--sort", "path", "--no-config", "--max-filesize", str(settings.max_file_bytes),
        "-F", "-e", term, ".", *exclusion_args(settings.exclude_globs), *glob_args(globs),
    ]


def _take_records(buffer: bytearray, hits: list[tuple[str, int]], limit: int) -> None:
    """Move complete ``path\\0line:text\\n`` records from ``buffer`` into ``hits``.

    The path ends at the NUL (a path cannot contain one) and the record at
    the next newline after it (ripgrep's line terminator, so the matched text
    cannot contain one); a partial record stays in the buffer. Stops once
    ``limit`` hits are held, since the caller only needs to know there are more.
    """
    start = 0
    while len(hits) < limit:
        nul = buffer.find(b"\0", start)
        if nul < 0:
            break
        end = buffer.find(b"\n", nul + 1)
        if end < 0:
            break
        number = bytes(buffer[nul + 1 : buffer.index(b":", nul + 1, end)])
        path = bytes(buffer[start:nul]).decode("utf-8", "surrogateescape")
        hits.append((path.removeprefix("./"), int(number)))
        start = end + 1
    del buffer[:start]


def search_term(root: Path, term: str, globs: tuple[str, ...], settings: Settings) -> TermResult:
    """Run ripgrep for one term, reading its output as it comes, within the caps."""
    cap = settings.hits_per_term
    result = TermResult()
    # stderr goes to a file so a flood of warnings can never block rg while we
    # wait on stdout.
    with (
        tempfile.TemporaryFile() as errors,
        subprocess.Popen(
            rg_command(term, globs, settings),
            cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
        ) as proc,
    ):
        assert proc.stdout is not None  # stdout=PIPE guarantees it
        try:
            stopped = _read_hits(proc.stdout.fileno(), result, cap + 1, settings.search_timeout_s)
        except BaseException:
            proc.kill()  # rg must not outlive a failed read
            raise
        if stopped is not None:
            proc.kill()
        proc.wait()
        if stopped == "truncated":
            del result.hits[cap:]
            result.diagnostics.append(Diagnostic(
                "unavailable", "truncated",
                detail=f"{term!r}: more than {cap} hits, kept the first {cap}",
            ))
        elif stopped == "timeout":
            result.diagnostics.append(Diagnostic("unavailable", "timeout", detail=term))
        elif proc.returncode not in (0, _NO_MATCH):
            # Exit 2: some file or glob could not be searched; the hits found are still real.
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace").strip().splitlines()
            result.diagnostics.append(Diagnostic(
                "unavailable", "search_failed",
                detail=f"{term!r}: {message[0] if message else f'rg exit {proc.returncode}'}",
            ))
    return result


def _read_hits(
    fd: int, result: TermResult, limit: int, timeout_s: float
) -> Literal["truncated", "timeout"] | None:
    """Read hits until EOF (None), ``limit`` hits ("truncated") or the deadline ("timeout")."""
    deadline = time.monotonic() + timeout_s
    buffer = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            if not selector.select(remaining):
                continue
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return None
            buffer += chunk
            _take_records(buffer, result.hits, limit)
            if len(result.hits) >= limit:
                return "truncated"


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    terms = search_terms(query)
    # No source globs means no parser is enabled, so there are no source files
    # to search (and rg without a file type would search every file).
    if not terms or not repo.globs:
        return None
    candidates: list[Candidate] = []
    diagnostics: list[Diagnostic] = []
    for term in terms:
        try:
            found = search_term(repo.root, term, repo.globs, settings)
        except (RipgrepMissing, OSError) as err:
            diagnostics.append(Diagnostic("unavailable", "search_failed", detail=str(err)))
            break
        diagnostics.extend(found.diagnostics)
        candidates.extend(
            Candidate(
                span=Span(path, line, line), kind="line", qualname=None, sources=(SOURCE,),
                terms=(term,), hit_lines=(line,),
            )
            for path, line in found.hits
        )
    return Recall(source=SOURCE, candidates=tuple(candidates), diagnostics=tuple(diagnostics))
