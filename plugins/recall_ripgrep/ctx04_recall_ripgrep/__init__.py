"""Lexical recall (spec §3.2, source 1): the lines that contain a query term verbatim.

Terms are the query's identifiers, unresolved names, error strings and file
paths, deduplicated in first-seen order. The spec runs one ripgrep per term;
this plugin runs one ripgrep for all of them (``-F -e T1 -e T2 ...``) and
attributes each printed line back to every term it contains, which gives
the same hits as one run per term (``tests/test_recall_ripgrep.py`` proves
it against per-term runs) at the cost of one walk of the tree instead of one
per term. Deliberate deviations from the spec's invocation:

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

A checker's or linter's code that the task's title names (``Error E108 does
not cover some cases``, ``UP028 fix fails on unparenthesized tuple``) names
a place, when at most ``NAMED_CODE_MAX_PLACES`` lines outside tests hold it:
the check that raises it, the rule that reports it, its registration. Those
hits are ``pointed_at``, as a stack frame's line is. A code the task only
quotes from a tool's output, below the title, is a term like any other:
pylint's own tasks paste its messages, and the fix is seldom in the checker
that printed them.

rg prints every line holding any term until every term is full, so one
term short of its hits (the task's sentence, an error string, a name used
once) makes it print every line of the common ones to the end of the tree.
Once the output passes ``SEPARATE_AFTER_BYTES`` with some terms full and
some short, rg is stopped and the short ones are searched again on their
own, from the start: one run per set of terms finds the same hits as one
run for all, and the second prints only their lines.

Caps: at most ``settings.hits_per_term`` (40) hits per term, the first ones
in path order; a term with more carries ``Diagnostic(kind="unavailable",
reason="truncated")``: a cut result is never presented as complete. Once
every term has more than its cap, ripgrep is stopped. A run longer than
``settings.search_timeout_s``, or printing more than 64 MiB, is stopped too,
and every term not yet full is reported (``timeout``, ``truncated``) with
the hits read so far. With ``settings.max_search_terms`` set (the compact
profile: 4), later terms are not searched and an ``omitted`` diagnostic
names them.
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ctx04_core.hookspecs import hookimpl
from ctx04_core.paths import is_test_path
from ctx04_core.repository import Repo
from ctx04_core.ripgrep import RipgrepMissing, exclusion_args, glob_args, rg_binary
from ctx04_core.settings import Settings
from ctx04_core.subprocesses import ChildResult, run_bounded
from ctx04_core.text import rule_codes, simple_name
from ctx04_core.types import Candidate, Diagnostic, Query, Recall, Span

SOURCE = "ripgrep"
# Whole matched lines are printed (a hit is attributed to a term by the
# term's presence in the line), so the bound is on the whole output.
_MAX_OUTPUT_BYTES = 64 * 1024 * 1024
# rg's exit status when it searched without error but matched nothing.
_NO_MATCH = 1
# 50,000 generated files: about 47 MB a retrieval in one run; two runs took
# 1.0-1.5 s against 1.7-1.8 s (docs/benchmarks.md, "Scale").
SEPARATE_AFTER_BYTES = 4 * 1024 * 1024
# A code is defined once and registered or documented once or twice more;
# a code held by more lines is a common word of the repository.
NAMED_CODE_MAX_PLACES = 3


def search_terms(query: Query) -> list[str]:
    """The query's lexical terms, each once, in first-seen order."""
    terms: dict[str, None] = {}
    for term in (*query.identifiers, *query.unresolved, *query.error_strings, *query.file_paths):
        # An empty fixed string matches every line; it says nothing about the task.
        if term:
            terms.setdefault(term, None)
    return list(terms)


def rg_command(terms: list[str], globs: tuple[str, ...], settings: Settings) -> list[str]:
    patterns = [arg for term in terms for arg in ("-e", term)]
    return [
        rg_binary(), "--no-heading", "--line-number", "--color", "never", "--null",
        "--sort", "path", "--no-config", "--max-filesize", str(settings.max_file_bytes),
        "-F", *patterns, ".", *exclusion_args(settings.exclude_globs), *glob_args(globs),
    ]


# One printed line; the path may hold anything but a NUL.
_RECORD = re.compile(rb"[^\0]*\0([0-9]+):[^\n]*\n")


def _complete_records_end(output: bytearray) -> int:
    """The length of the prefix of ``output`` that is whole records.

    The first newline after the last NUL ends the last record if that
    record is whole; else the first newline after the NUL before ends the
    one before it. Searching only whole records keeps the regex linear.
    """
    last_nul = output.rfind(b"\0")
    if last_nul < 0:
        return 0
    end = output.find(b"\n", last_nul)
    if end < 0:
        previous_nul = output.rfind(b"\0", 0, last_nul)
        end = output.find(b"\n", previous_nul) if previous_nul >= 0 else -1
    return end + 1


@dataclass
class TermHits:
    """Attributes ripgrep's printed lines to the terms they contain, as they arrive.

    Records are ``path\\0number:text\\n``: the path ends at the NUL (a path
    cannot contain one, but may contain a newline) and the record at the
    first newline after it (the matched text cannot contain one). Each
    term's occurrences are found with ``bytes.find`` over the complete
    records received and placed in their record by bisection, so a term that
    already holds ``limit`` hits costs nothing more; an occurrence in a path
    or line number is not a hit.
    """

    terms: list[str]
    limit: int
    hits: dict[str, list[tuple[str, int]]] = field(init=False)
    _patterns: dict[str, bytes] = field(init=False)
    _pending: bytearray = field(init=False, default_factory=bytearray)

    def __post_init__(self) -> None:
        self.hits = {term: [] for term in self.terms}
        self._patterns = {t: t.encode("utf-8", "surrogateescape") for t in self.terms}

    def full(self) -> bool:
        return all(len(found) >= self.limit for found in self.hits.values())

    def short(self) -> list[str]:
        """The terms that do not hold ``limit`` hits yet, in order."""
        return [term for term, found in self.hits.items() if len(found) < self.limit]

    def feed(self, chunk: bytes) -> bool:
        """Take the next output bytes; True once every term holds ``limit`` hits."""
        self._pending += chunk
        complete = _complete_records_end(self._pending)
        if complete == 0:
            return False
        block = bytes(self._pending[:complete])
        del self._pending[:complete]
        # (path start, NUL, text start, record end) of each record, in order.
        records = [
            (m.start(), m.start(1) - 1, m.end(1) + 1, m.end()) for m in _RECORD.finditer(block)
        ]
        ends = [record[3] for record in records]
        for term, found in self.hits.items():
            if len(found) < self.limit:
                self._scan(block, records, ends, self._patterns[term], found)
        return self.full()

    def _scan(
        self, block: bytes, records: list[tuple[int, int, int, int]], ends: list[int],
        pattern: bytes, found: list[tuple[str, int]],
    ) -> None:
        at = block.find(pattern)
        while at >= 0 and len(found) < self.limit:
            start, nul, text_start, end = records[bisect.bisect_right(ends, at)]
            if at < text_start:
                # In the path or line number; the text may still hold it.
                at = block.find(pattern, text_start, end)
                if at < 0:
                    at = block.find(pattern, end)
                continue
            path = block[start:nul].decode("utf-8", "surrogateescape").removeprefix("./")
            found.append((path, int(block[nul + 1 : text_start - 1])))
            at = block.find(pattern, end)


def search(root: Path, terms: list[str], globs: tuple[str, ...], settings: Settings) -> tuple[
    dict[str, list[tuple[str, int]]], list[Diagnostic]
]:
    """Each term's hits in path order, and what went wrong: one ripgrep run for
    all terms, and a second for those still short when the first printed
    ``SEPARATE_AFTER_BYTES`` with some terms full."""
    cap = settings.hits_per_term
    deadline = time.monotonic() + settings.search_timeout_s
    # One hit more than the cap proves a term's result is cut.
    attributed = TermHits(terms, cap + 1)
    printed = 0

    def first(chunk: bytes) -> bool:
        nonlocal printed
        printed += len(chunk)
        if attributed.feed(chunk):
            return True
        return printed > SEPARATE_AFTER_BYTES and len(attributed.short()) < len(terms)

    together = _run(terms, globs, settings, root, deadline, first)
    # Per term, the rg run whose output its hits come from.
    run_of = dict.fromkeys(terms, together)
    short = attributed.short()
    if together.stopped == "enough" and short:
        again = TermHits(short, cap + 1)
        alone = _run(short, globs, settings, root, deadline, again.feed)
        attributed.hits.update(again.hits)
        run_of.update(dict.fromkeys(short, alone))
    diagnostics: list[Diagnostic] = []
    for term, found in attributed.hits.items():
        run = run_of[term]
        if len(found) > cap:
            del found[cap:]
            diagnostics.append(Diagnostic(
                "unavailable", "truncated",
                detail=f"{term!r}: more than {cap} hits, kept the first {len(found)}",
            ))
        elif run.stopped == "timeout":
            diagnostics.append(Diagnostic("unavailable", "timeout", detail=term))
        elif run.stopped == "output_limit":
            diagnostics.append(Diagnostic(
                "unavailable", "truncated",
                detail=f"{term!r}: the search printed over {_MAX_OUTPUT_BYTES} bytes, "
                f"kept the {len(found)} hits before that",
            ))
        elif run.returncode not in (0, _NO_MATCH):
            # Exit 2: some file or glob could not be searched; the hits found are still real.
            diagnostics.append(Diagnostic(
                "unavailable", "search_failed", detail=f"{term!r}: {run.first_error_line()}",
            ))
    return attributed.hits, diagnostics


def _run(
    terms: list[str], globs: tuple[str, ...], settings: Settings, root: Path, deadline: float,
    consume: Callable[[bytes], bool],
) -> ChildResult:
    return run_bounded(
        rg_command(terms, globs, settings), cwd=root,
        timeout_s=max(0.0, deadline - time.monotonic()), max_stdout_bytes=_MAX_OUTPUT_BYTES,
        consume=consume,
    )


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
    # A line cannot contain a newline, and rg refuses such a literal for every term.
    unsearchable = [term for term in terms if "\n" in term or "\0" in term]
    diagnostics.extend(
        Diagnostic(
            "unavailable", "search_failed",
            detail=f"{term!r}: a line cannot contain a newline or NUL",
        )
        for term in unsearchable
    )
    terms = [term for term in terms if term not in unsearchable]
    if not terms:
        return Recall(source=SOURCE, candidates=(), diagnostics=tuple(diagnostics))
    try:
        hits, found_diagnostics = search(repo.root, terms, repo.globs, settings)
    except (RipgrepMissing, OSError) as err:
        diagnostics.append(Diagnostic("unavailable", "search_failed", detail=str(err)))
        hits, found_diagnostics = {}, []
    diagnostics.extend(found_diagnostics)
    named = named_code_places(query.goal_hint, hits, settings.hits_per_term)
    candidates = tuple(
        Candidate(
            span=Span(path, line, line), kind="line", qualname=None, sources=(SOURCE,),
            terms=(term,), hit_lines=(line,), pointed_at=(term, path, line) in named,
            pointed_lines=(line,) if (term, path, line) in named else (),
        )
        for term, found in hits.items()
        for path, line in found
    )
    return Recall(source=SOURCE, candidates=candidates, diagnostics=tuple(diagnostics))


def named_code_places(
    title: str, hits: dict[str, list[tuple[str, int]]], cap: int
) -> set[tuple[str, str, int]]:
    """``(term, path, line)`` of the hits outside tests of each term that is
    (or, qualified, ends in) a code ``title`` names, for the terms with at most
    ``NAMED_CODE_MAX_PLACES`` of them; a term cut at ``cap`` hits may have
    more past the cut."""
    codes = rule_codes(title)
    places: set[tuple[str, str, int]] = set()
    if not codes:
        return places
    for term, found in hits.items():
        if simple_name(term) not in codes or len(found) >= cap:
            continue
        outside_tests = [(term, path, line) for path, line in found if not is_test_path(path)]
        if len(outside_tests) <= NAMED_CODE_MAX_PLACES:
            places.update(outside_tests)
    return places
