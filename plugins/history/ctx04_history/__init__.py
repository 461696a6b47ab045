"""History signal: the files that past commits resembling the task changed.

A repository's own log says where work on a subject lands: the commits
whose messages read like the task ("Fixed #31503 -- Split AlterFooTogether
operations") changed the files a new change of the same kind will change.
This holds in every language and needs no parser.

Log: the newest ``settings.history_commits`` non-merge commits reachable
from ``settings.history_rev`` (never anything later), read with ``git log``
under a deadline and a byte cap, from the repository's own git or from
``settings.history_git_dir`` (the benchmark gives each tree the log of its
base commit this way). Parsed once per commit and kept in the code index
(``CodeIndex.store_derived``), so a retrieval at the same HEAD reads no git.

Signal ``history`` (scale, weight ``settings.history_weight``): the task's
content words are scored against each commit message with BM25 (idf over
the log); the best ``settings.history_top_commits`` commits give each file
they changed their score divided by the square root of the number of files
they changed (a sweeping commit says little about any one file); each
file's total is divided by the square root of the number of commits in the
log that changed it (a file every change touches says little about this
one); a candidate's value is its file's total over the best file's, in
[0, 1].

Signal ``cochange`` (scale, weight ``settings.cochange_weight``): the files
that usually change with the files the task names. The named files are the
paths the task gives and the files of the definitions it names (a name with
at most ``COCHANGE_NAMESAKES`` definitions); for every other file, the
largest share of one named file's commits that changed it too (commits of
more than ``COCHANGE_MAX_FILES`` files, sweeping renames and reformats,
left out); in [0, 1]. A fix to ``Response.iter_content`` that belongs in
``utils.py`` shows as the commits that changed both.

No git, no commit, a rev git does not know, or a shallow clone: a
diagnostic (``unavailable``) from the ``recall`` hook, which proposes no
candidate; the signal is then 0 for every candidate.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ctx04_core.bm25 import idf, score
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.subprocesses import run_bounded
from ctx04_core.text import content_terms, simple_name, tokenize
from ctx04_core.types import Candidate, Diagnostic, Query, Recall, Signal

SOURCE = "history"
COCHANGE = "cochange"
COCHANGE_NAMESAKES = 2  # a name defined more often says little about which file
COCHANGE_MAX_FILES = 20
RECORD, FIELD = "\x1e", "\x1f"
GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Commit:
    message: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class Log:
    commits: tuple[Commit, ...]
    trouble: Diagnostic | None  # why the log is missing or partial

    @functools.cached_property
    def postings(self) -> dict[str, list[tuple[int, int]]]:
        """term -> (commit index, count) for each message holding it: a query
        then touches only the commits that share a term with it."""
        found: dict[str, list[tuple[int, int]]] = {}
        for i, commit in enumerate(self.commits):
            for term, count in Counter(tokenize(commit.message)).items():
                found.setdefault(term, []).append((i, count))
        return found

    @functools.cached_property
    def changes(self) -> Counter[str]:
        """How many commits of the log changed each file."""
        return Counter(path for commit in self.commits for path in commit.files)

    @functools.cached_property
    def lengths(self) -> list[int]:
        """Each message's number of terms."""
        lengths = [0] * len(self.commits)
        for entries in self.postings.values():
            for i, count in entries:
                lengths[i] += count
        return lengths


def _git(settings: Settings, root: Path) -> list[str]:
    if settings.history_git_dir:
        return ["git", "--git-dir", settings.history_git_dir]
    # --relative below makes paths relative to the root, as the index has them.
    return ["git", "-C", str(root)]


def read_log(root: Path, settings: Settings) -> Log:
    """The newest commits reachable from ``history_rev``, or why there are none."""
    rev = settings.history_rev
    if rev.startswith("-"):
        return Log((), Diagnostic("unavailable", "no history", detail=f"not a revision: {rev}"))
    argv = [
        *_git(settings, root), "-c", "core.quotePath=false", "log", "--no-merges",
        f"-n{settings.history_commits}", f"--format={RECORD}%s%n%n%b{FIELD}", "--name-only",
        *([] if settings.history_git_dir else ["--relative"]), rev, "--",
    ]
    try:
        done = run_bounded(argv, cwd=root, timeout_s=GIT_TIMEOUT_S,
                           max_stdout_bytes=settings.history_max_bytes)
    except OSError as err:
        return Log((), Diagnostic("unavailable", "no history", detail=f"git: {err}"))
    if done.returncode not in (0, None):
        return Log((), Diagnostic("unavailable", "no history", detail=done.first_error_line()))
    text = done.stdout.decode("utf-8", "replace")
    records = text.split(RECORD)[1:]
    trouble = None
    if done.stopped is not None:
        records = records[:-1]  # the last record may be cut
        trouble = Diagnostic(
            "unavailable", "truncated",
            detail=f"git log stopped ({done.stopped}) after {len(records)} commits",
        )
    commits = []
    for record in records:
        message, _, files = record.partition(FIELD)
        commits.append(Commit(message.strip(), tuple(f for f in files.split("\n") if f)))
    if trouble is None and _shallow(root, settings):
        trouble = Diagnostic(
            "unavailable", "shallow clone",
            detail=f"the history holds only {len(commits)} commits",
        )
    return Log(tuple(commits), trouble)


def _shallow(root: Path, settings: Settings) -> bool:
    argv = [*_git(settings, root), "rev-parse", "--is-shallow-repository"]
    try:
        done = run_bounded(argv, cwd=root, timeout_s=GIT_TIMEOUT_S, max_stdout_bytes=64)
    except OSError:
        return False
    return done.stdout.strip() == b"true"


# Parsed logs by cache key: the recall and the signals hook of one retrieval,
# and a warm process's next retrievals at the same HEAD, read it once.
_MEMO: dict[str, Log] = {}
_MEMO_ENTRIES = 4


def log_of(repo: Repo, settings: Settings) -> Log:
    """The log, from memory or the index when this revision's log was read before."""
    key = _cache_key(repo, settings)
    if key is None:
        return Log((), Diagnostic("unavailable", "no history", detail="no git commit to read"))
    if key not in _MEMO:
        if len(_MEMO) >= _MEMO_ENTRIES:
            _MEMO.clear()
        _MEMO[key] = _stored_log(repo, settings, key)
    return _MEMO[key]


def _cache_key(repo: Repo, settings: Settings) -> str | None:
    rev, n = settings.history_rev, settings.history_commits
    if settings.history_git_dir:
        return f"history:{settings.history_git_dir}:{rev}:{n}"
    if repo.base is None:
        return None
    # HEAD moves: key the repository's own log by the commit it names now.
    return f"history:{repo.root}:{repo.base if rev == 'HEAD' else rev}:{n}"


def _stored_log(repo: Repo, settings: Settings, key: str) -> Log:
    stored = repo.index.derived(key)
    if stored is not None:
        return Log(tuple(Commit(m, tuple(f)) for m, f in json.loads(stored)), None)
    log = read_log(repo.root, settings)
    if log.trouble is None:
        # A read-only index: the log is read from git again next time.
        with contextlib.suppress(sqlite3.Error):
            repo.index.store_derived(key, json.dumps([[c.message, c.files] for c in log.commits]))
    return log


def file_scores(query: Query, log: Log, settings: Settings) -> dict[str, float]:
    """Each file's share of the evidence of the commits most like the task, in [0, 1]."""
    terms = content_terms(query.task_text)
    if not terms or not log.commits:
        return {}
    goal = set(tokenize(query.goal_hint))
    weights = {t: settings.goal_weight if t in goal else 1.0 for t in terms}
    n, lengths = len(log.commits), log.lengths
    avgdl = sum(lengths) / n
    postings = {t: log.postings.get(t, []) for t in terms}
    idfs = {t: idf(n, len(entries)) for t, entries in postings.items()}
    counts: dict[int, dict[str, int]] = {}
    for term, entries in postings.items():
        for i, count in entries:
            counts.setdefault(i, {})[term] = count
    k1, b = settings.bm25_k1, settings.bm25_b
    scored = [(score(weights, idfs, tf, lengths[i], avgdl, k1, b), i) for i, tf in counts.items()]
    best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
    totals: dict[str, float] = {}
    for value, i in best[: settings.history_top_commits]:
        files = log.commits[i].files
        for path in files:
            totals[path] = totals.get(path, 0.0) + value / math.sqrt(len(files))
    # A file many commits change (a registry, a changelog) sits in any set of
    # commits: its votes count less, by the square root of its changes.
    totals = {path: total / math.sqrt(log.changes[path]) for path, total in totals.items()}
    top = max(totals.values(), default=0.0)
    return {path: total / top for path, total in totals.items()} if top else {}


@hookimpl
def recall(repo: Repo, settings: Settings) -> Recall | None:
    trouble = log_of(repo, settings).trouble
    return None if trouble is None else Recall(SOURCE, (), (trouble,))


def named_files(query: Query, repo: Repo) -> set[str]:
    """The paths the task gives and the files of the definitions it names."""
    named = set(query.file_paths)
    for identifier in query.identifiers:
        found = [n for n in repo.index.lookup(simple_name(identifier)) if n.kind != "module"]
        if len(found) <= COCHANGE_NAMESAKES:
            named.update(n.span.path for n in found)
    return named


def cochange_scores(named: set[str], log: Log) -> dict[str, float]:
    """Each other file's largest share of one named file's commits, in [0, 1]."""
    together: dict[tuple[str, str], int] = {}
    for commit in log.commits:
        files = set(commit.files)
        if len(files) > COCHANGE_MAX_FILES:
            continue
        for hub in files & named:
            for other in files - named:
                together[hub, other] = together.get((hub, other), 0) + 1
    scores: dict[str, float] = {}
    for (hub, other), count in together.items():
        scores[other] = max(scores.get(other, 0.0), count / log.changes[hub])
    return scores


@hookimpl
def signals(
    query: Query, candidates: tuple[Candidate, ...], repo: Repo, settings: Settings
) -> list[Signal]:
    log = log_of(repo, settings)
    scores = file_scores(query, log, settings)
    values = tuple(scores.get(c.span.path, 0.0) for c in candidates)
    found = [Signal(SOURCE, values, settings.history_weight, "scale")]
    if settings.signal_weight(COCHANGE, settings.cochange_weight):
        partners = cochange_scores(named_files(query, repo), log)
        found.append(Signal(COCHANGE, tuple(partners.get(c.span.path, 0.0) for c in candidates),
                            settings.cochange_weight, "scale"))
    return found
