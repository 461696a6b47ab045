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
- ``--max-columns 200``: only a hit's path and line number are used, so a
  long matched line need not be copied through the pipe;
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
``reason="timeout"``; the hits read before the kill are kept. With
``settings.max_search_terms`` set (the compact profile: 4), later terms are
not searched and an ``omitted`` diagnostic names them.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.ripgrep import RipgrepMissing, exclusion_args, glob_args, rg_binary
from ctx04_core.settings import Settings
from ctx04_core.subprocesses import run_bounded
from ctx04_core.types import Candidate, Diagnostic, Query, Recall, Span

SOURCE = "ripgrep"
# Only the path and line number of a hit are used: a long matched line is
# replaced by rg's short "[Omitted long line]" note, which bounds the output.
_MAX_COLUMNS = 200
_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
_PARALLEL_SEARCHES = max(2, os.cpu_count() or 1)
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
        "--max-columns", str(_MAX_COLUMNS),
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
    done = run_bounded(
        rg_command(term, globs, settings), cwd=root, timeout_s=settings.search_timeout_s,
        max_stdout_bytes=_MAX_OUTPUT_BYTES,
        # One hit more than the cap proves the result is cut; rg need not go on.
        enough=lambda out: out.count(b"\n") > cap,
    )
    result = TermResult()
    _take_records(bytearray(done.stdout), result.hits, cap + 1)
    if done.stopped in ("enough", "output_limit") or len(result.hits) > cap:
        del result.hits[cap:]
        result.diagnostics.append(Diagnostic(
            "unavailable", "truncated",
            detail=f"{term!r}: more than {cap} hits, kept the first {len(result.hits)}",
        ))
    elif done.stopped == "timeout":
        result.diagnostics.append(Diagnostic("unavailable", "timeout", detail=term))
    elif done.returncode not in (0, _NO_MATCH):
        # Exit 2: some file or glob could not be searched; the hits found are still real.
        result.diagnostics.append(Diagnostic(
            "unavailable", "search_failed", detail=f"{term!r}: {done.first_error_line()}",
        ))
    return result


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    terms = search_terms(query)
    diagnostics: list[Diagnostic] = []
    if settings.max_search_terms is not None and len(terms) > settings.max_search_terms:
        skipped = terms[settings.max_search_terms :]
        terms = terms[: settings.max_search_terms]
        diagnostics.append(Diagnostic(
            "omitted", "search terms budget",
            detail=f"{len(skipped)} terms not searched: {', '.join(map(repr, skipped))}",
        ))
    # No source globs means no parser is enabled, so there are no source files
    # to search (and rg without a file type would search every file).
    if not terms or not repo.globs:
        return None
    candidates: list[Candidate] = []
    try:
        # rg with --sort path runs on one core; a few at once use the others.
        # map() keeps the terms' order, so the result is that of one-by-one runs.
        with ThreadPoolExecutor(max_workers=_PARALLEL_SEARCHES) as pool:
            found_all = list(
                pool.map(lambda term: search_term(repo.root, term, repo.globs, settings), terms)
            )
    except (RipgrepMissing, OSError) as err:
        diagnostics.append(Diagnostic("unavailable", "search_failed", detail=str(err)))
        found_all = []
    for term, found in zip(terms, found_all, strict=False):
        diagnostics.extend(found.diagnostics)
        candidates.extend(
            Candidate(
                span=Span(path, line, line), kind="line", qualname=None, sources=(SOURCE,),
                terms=(term,), hit_lines=(line,),
            )
            for path, line in found.hits
        )
    return Recall(source=SOURCE, candidates=tuple(candidates), diagnostics=tuple(diagnostics))
