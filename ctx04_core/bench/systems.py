"""The systems the benchmark runs: ctx04 itself, and a plain BM25 baseline.

Each takes the task text and a materialised tree and returns an
:class:`~ctx04_core.bench.metrics.Answer`: the ranked candidates, the lines
its slice shows, the slice's tokens and the wall time.

The BM25 baseline ranks documents of the files ctx04's code index walks
(the parser plugins' source globs, so the languages ctx04 covers) with the
``bm25s`` package (its default tokenization, English stopwords, its default
Lucene BM25), the query being the whole task. The documents of a file the
parse hook parsed are its definitions' own lines: a function's or method's
whole span, a type's (class, struct, impl, ...) or module's span minus the
definitions nested in it; when the parser gives no module node, the lines
outside every definition are one more document, of kind ``lines`` without a
qualname (the file itself, as ctx04's merge places such a line). A file with
no parser, or that does not parse, is cut into runs of ``CHUNK_LINES`` lines.
Its slice renders the top documents' own lines in rank order, in ctx04's
own excerpt format, keeping the longest prefix of the ranking whose text
fits the token budget, so its tokens and irrelevant-context ratio compare
with ctx04's. Documents scoring 0 (no query term) are not ranked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pluggy

from ctx04_core.bench.metrics import Answer, RankedItem, Shown
from ctx04_core.ranking.model import own_probability
from ctx04_core.settings import Settings
from ctx04_core.stages.merge import RUN
from ctx04_core.stages.regions import node_own_lines
from ctx04_core.stages.value import HEAD
from ctx04_core.types import MODULE, WHOLE, Candidate, Node, RankedCandidate, Span

SYSTEMS = ("ctx04", "bm25")
SOURCE = "bm25"  # the baseline's candidates' source
CHUNK_LINES = 60
BM25_TOP_K = 20
BM25_SETTINGS = {"top_k": BM25_TOP_K, "stopwords": "en", "method": "lucene", "k1": 1.5, "b": 0.75}


def run_ctx04(task: str, root: Path, settings: Settings, pm: pluggy.PluginManager) -> Answer:
    from ctx04_core.pipeline import retrieve

    started = time.perf_counter()
    result = retrieve(task, root, settings=settings, plugins=pm)
    seconds = time.perf_counter() - started
    included = [e for e in result.context.entries if e.included]
    order = list(result.candidates)
    candidate_ranks = {r.rank for r in order}
    # Entries past the candidates (the reserve's, the leading file's head, the
    # signatures of called definitions) are shown lines, not ranked ones.
    ranked_entries = [e for e in included if e.excerpt.ranked.rank in candidate_ranks]
    shown_ranks = {e.excerpt.ranked.rank for e in ranked_entries}
    # A door reorders the shown candidates among the places they hold, so the
    # metrics measure its order and a door that keeps the order changes nothing.
    places = [i for i, r in enumerate(order) if r.rank in shown_ranks]
    for place, entry in zip(places, ranked_entries, strict=True):
        order[place] = entry.excerpt.ranked
    ranked = tuple(
        RankedItem(
            position, r.candidate.span.path, r.candidate.span.start_line,
            r.candidate.span.end_line, r.candidate.qualname, r.candidate.kind,
            r.rank in shown_ranks, r.score, r.signals, r.candidate.sources,
            r.candidate.terms, r.candidate.hit_lines, r.model_score,
            own_probability(r),
        )
        for position, r in enumerate(order, 1)
    )
    rank_of = {r: p for p, r in enumerate(order, 1)}

    def part(ranked: RankedCandidate, lines: tuple[int, ...]) -> Shown:
        path = ranked.candidate.span.path
        if ranked.rank in candidate_ranks:
            return Shown(path, lines, rank_of[ranked])
        return Shown(path, lines, extra=_extra(ranked.candidate))

    shown = tuple(part(e.excerpt.ranked, tuple(n for n, _ in e.excerpt.lines)) for e in included)
    door = None
    if result.decision is not None:
        door = {"ranked": result.decision.selection is not None, **asdict(result.decision.call)}
    unavailable = tuple(
        (d.reason, d.detail) for d in result.diagnostics if d.kind == "unavailable"
    )
    return Answer(ranked, shown, result.context.tokens, seconds, result.index.seconds, door,
                  unavailable)


def _extra(candidate: Candidate) -> str:
    """What an entry past the candidates is (one of ``metrics.EXTRAS``)."""
    from ctx04_core.pipeline import CALLED

    if HEAD in candidate.sources:
        return "head"
    return "called" if CALLED in candidate.sources else "reserve"


def run_bm25(task: str, root: Path, settings: Settings, pm: pluggy.PluginManager) -> Answer:
    import bm25s

    from ctx04_core.evidence import HEADER, heading, quoted_lines, source_ref
    from ctx04_core.pipeline import open_repo
    from ctx04_core.repository import resolve_root
    from ctx04_core.ripgrep import list_files
    from ctx04_core.tokens import count_tokens
    from ctx04_core.types import Excerpt

    started = time.perf_counter()
    # Repo reads only files under its root as given, so the root must be resolved.
    root = resolve_root(root)
    repo, stats = open_repo(root, pm, settings)
    try:
        docs: list[tuple[Candidate, list[tuple[int, str]]]] = []
        for path in list_files(root, repo.globs, settings.exclude_globs,
                               settings.search_timeout_s):
            source = repo.source(path)
            if source is None:
                continue
            for candidate, numbers in file_documents(
                path, repo.index.file_nodes(path), len(source.lines)
            ):
                docs.append((candidate, [(n, source.lines[n - 1]) for n in numbers]))
        order = _bm25_order(bm25s, task, ["\n".join(t for _, t in lines) for _, lines in docs])
        text = HEADER
        ranked: list[RankedItem] = []
        shown: list[Shown] = []
        full = False
        for rank, (index, value) in enumerate(order[:BM25_TOP_K], 1):
            candidate, lines = docs[index]
            excerpt = Excerpt(RankedCandidate(candidate, rank, value), tuple(lines), WHOLE)
            if not full:
                quoted, shortened, _ = quoted_lines(excerpt, settings.max_line_bytes)
                source = repo.source(candidate.span.path)
                digest = source.digest if source is not None else ""
                ref = source_ref(excerpt, quoted, shortened, digest, repo.base)
                trial = text + heading(excerpt, ref) + quoted + "\n"
                # The prefix rule: the first document that does not fit ends the slice.
                full = count_tokens(trial) > settings.budget_tokens
                if not full:
                    text = trial
                    shown.append(Shown(candidate.span.path, tuple(n for n, _ in lines), rank))
            span = candidate.span
            ranked.append(RankedItem(rank, span.path, span.start_line, span.end_line,
                                     candidate.qualname, candidate.kind, not full, value))
    finally:
        repo.index.close()
    return Answer(tuple(ranked), tuple(shown), count_tokens(text), time.perf_counter() - started,
                  stats.seconds)


def file_documents(
    path: str, nodes: Sequence[Node], line_count: int
) -> list[tuple[Candidate, list[int]]]:
    """The BM25 documents of one file of ``line_count`` lines: (candidate, its line numbers).

    ``nodes`` are the file's definitions (none when it has no parser or does
    not parse); documents without a line are left out.
    """
    if not nodes:
        ends = [(start, min(start + CHUNK_LINES - 1, line_count))
                for start in range(1, line_count + 1, CHUNK_LINES)]
        return [(Candidate(Span(path, first, last), RUN, None, (SOURCE,)),
                 list(range(first, last + 1))) for first, last in ends]
    docs = []
    for node in nodes:
        numbers = [n for n in node_own_lines(node, nodes) if n <= line_count]
        if numbers:
            docs.append((Candidate(node.span, node.kind, node.qualname, (SOURCE,)), numbers))
    if not any(node.kind == MODULE for node in nodes):
        inside = {n for node in nodes for n in range(node.span.start_line, node.span.end_line + 1)}
        rest = [n for n in range(1, line_count + 1) if n not in inside]
        if rest:
            docs.append((Candidate(Span(path, rest[0], rest[-1]), RUN, None, (SOURCE,)), rest))
    return docs


def _bm25_order(bm25s: Any, task: str, texts: list[str]) -> list[tuple[int, float]]:
    """(document index, score) of every document scoring above 0, best first, ties by index."""
    if not texts:
        return []
    corpus = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    query = bm25s.tokenize(task, stopwords="en", return_ids=False, show_progress=False)[0]
    scores = [float(s) for s in retriever.get_scores(query)]
    return sorted(((i, s) for i, s in enumerate(scores) if s > 0), key=lambda p: (-p[1], p[0]))
