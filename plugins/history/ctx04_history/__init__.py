"""History signal: the files that past commits resembling the task changed.

A repository's own log says where work on a subject lands: the commits
whose messages read like the task ("Fixed #31503 -- Split AlterFooTogether
operations") changed the files a new change of the same kind will change.
This holds in every language and needs no parser.

Log: the newest ``settings.history_commits`` non-merge commits reachable
from ``settings.history_rev`` (never anything later), read with ``git log``
under a deadline and a byte cap, from the repository's own git or from
``settings.history_git_dir`` (the benchmark gives each tree the log of its
base commit this way). Where git cannot follow renames because the clone
lacks a file's contents (a partial clone, a snapshot without its largest
blobs), the log is read without following them: a moved file is then its
old and its new path. Parsed once per commit and kept in the code index
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
more than ``SWEEPING_FILES`` files, sweeping renames and reformats, left
out); in [0, 1]. A fix to ``Response.iter_content`` that belongs in
``utils.py`` shows as the commits that changed both.

Signal ``history_definition`` (scale, weight
``settings.history_definition_weight``): the functions, methods and classes
those same best commits changed. Each commit's hunks (``git show -U0``, with
git's own per-language function-name rules named in
``funcnames.gitattributes``) name the definition every hunk is in; a
commit's score is shared among the definitions it changed (divided by the
square root of their number; sweeping commits of more than
``SWEEPING_FILES`` files left out); a candidate's value is its definition's
total (matched by file and simple name) over the best one's, in [0, 1]; a
commit whose diff git cannot read (a blob the clone lacks) is left out. With
a non-zero weight the ``recall`` hook also proposes the
``DEFINITION_CANDIDATES`` best of them that the index holds today: the
function a task's predecessors fixed may share no word with the task. Each
commit's changed definitions are kept in the index by commit id.

No git, no commit, a rev git does not know, or a shallow clone: a
diagnostic (``unavailable``) from the ``recall`` hook, which proposes no
candidate; the signal is then 0 for every candidate.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TypeVar

from ctx04_core.bm25 import idf, postings_scores
from ctx04_core.diff import hunk_header
from ctx04_core.git import object_id, run_git
from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.subprocesses import ChildResult
from ctx04_core.text import content_terms, simple_name, tokenize
from ctx04_core.types import Candidate, Diagnostic, Query, Recall, Signal, Span

SOURCE = "history"
COCHANGE = "cochange"
DEFINITION = "history_definition"
COCHANGE_NAMESAKES = 2  # a name defined more often says little about which file
SWEEPING_FILES = 20
DEFINITION_CANDIDATES = 10
CHANGELOG = "changelog"
# A repository's habits are read off its newest commits: a changelog that
# replaced another (a release's notes) counts from when it began.
CHANGELOG_COMMITS = 100
# Where a changelog takes its next entry: its first lines (the unreleased
# section) more often than not.
CHANGELOG_HEAD_LINES = 15
# A file of release notes, by its name or its folder's: CHANGES, HISTORY.md,
# NEWS, docs/releases/3.0.txt, doc/whats_new/v1.3.rst, release-notes/...
# Other files fixes change as often (package.json, a lock file, AUTHORS) are
# no changelog: 2 of 67 such placements were gold, against 42 of 284 release
# notes (docs/benchmarks.md, "The running changelog is release notes by name").
_RELEASE_NOTES = re.compile(r"change|history|news|release|what'?s.?new|notes", re.IGNORECASE)
# Changed definitions are kept per commit: enough for a few hundred tasks'
# best commits before the oldest are read from git again.
CHANGED_ENTRIES = 4096
# git's output marks where a commit's record starts; a commit message is
# indented a column (every line of it, blank ones too), so none of its lines
# can look like that mark.
HEADER = "\x1e"
MESSAGE = "%w(0,1,1)"
Key = TypeVar("Key")
GIT_TIMEOUT_S = 10.0
# git's builtin function-name rules by file extension (``diff=python`` ...):
# without them a hunk in a method is named by its class line.
FUNCNAMES = Path(__file__).with_name("funcnames.gitattributes")
# The definition a hunk header names: a variable a declaration opens with
# (JavaScript's ``export const parse = (text) => {``, whose value may call
# other names), else the first call-shaped name that is no keyword (``def
# parse(``, ``func (r *T) Parse(``, ``void Foo::parse(``), else the name after
# a definition keyword (``class Parser``, ``def parse``).
VARIABLE = re.compile(r"^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)")
CALL_SHAPED = re.compile(r"([A-Za-z_$][\w$]*)\s*(?:<[^<>()]*>)?\s*\(")
DECLARED = re.compile(
    r"\b(?:class|struct|interface|enum|trait|module|def|fn|func|function)\s+([A-Za-z_$][\w$]*)"
)
NOT_NAMES = frozenset({
    "if", "elif", "for", "foreach", "while", "switch", "catch", "return",
    "func", "function", "fn", "def", "sizeof", "with", "match", "new",
})


@dataclass(frozen=True)
class Commit:
    sha: str
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


def _location(settings: Settings, root: Path) -> list[str]:
    if settings.history_git_dir:
        return ["--git-dir", settings.history_git_dir]
    # --relative below makes paths relative to the root, as the index has them.
    return ["-C", str(root)]


def read_log(root: Path, settings: Settings) -> Log:
    """The newest commits reachable from ``history_rev``, or why there are none."""
    rev = settings.history_rev
    if rev.startswith("-"):
        return Log((), Diagnostic("unavailable", "no history", detail=f"not a revision: {rev}"))
    try:
        done = _log(root, settings, rev)
        if done.returncode not in (0, None):
            # Following renames reads the files' contents; a clone without
            # some of them (a partial clone, a snapshot missing large blobs)
            # still has every commit's list of changed paths.
            done = _log(root, settings, rev, "--no-renames")
    except OSError as err:
        return Log((), Diagnostic("unavailable", "no history", detail=f"git: {err}"))
    if done.returncode not in (0, None):
        return Log((), Diagnostic("unavailable", "no history", detail=done.first_error_line()))
    commits = parse_log(done.stdout.decode("utf-8", "replace"))
    trouble = None
    if done.stopped is not None:
        commits = commits[:-1]  # the last record may be cut
        trouble = Diagnostic(
            "unavailable", "truncated",
            detail=f"git log stopped ({done.stopped}) after {len(commits)} commits",
        )
    if trouble is None and _shallow(root, settings):
        trouble = Diagnostic(
            "unavailable", "shallow clone",
            detail=f"the history holds only {len(commits)} commits",
        )
    return Log(tuple(commits), trouble)


def _log(root: Path, settings: Settings, rev: str, *options: str) -> ChildResult:
    return run_git(
        _location(settings, root), "log", "--no-merges", "--no-ext-diff", "--no-textconv",
        *options, f"-n{settings.history_commits}", f"--format={HEADER}%H%n{MESSAGE}%B",
        "--name-only", *([] if settings.history_git_dir else ["--relative"]),
        "--end-of-options", rev, "--",
        cwd=root, timeout_s=GIT_TIMEOUT_S, max_stdout_bytes=settings.history_max_bytes,
    )


def parse_log(text: str) -> list[Commit]:
    """The commits of ``git log --format=HEADER%H%nMESSAGE%B --name-only``.

    A record starts at a line that is the header mark and a full object id.
    Every line of a message is indented by the format (``%w(0,1,1)``, blank
    lines too), so a message cannot hold such a line, and the message ends
    at the first empty line; the changed paths follow, one a line, and git
    quotes a path holding a newline or any other control byte. Lines are
    split at ``\n`` alone, as git writes them.
    """
    commits: list[Commit] = []
    sha: str | None = None
    message: list[str] = []
    files: list[str] = []
    in_message = False
    for line in text.split("\n"):
        if line.startswith(HEADER) and object_id(line[len(HEADER):]):
            if sha is not None:
                commits.append(Commit(sha, "\n".join(message).strip(), tuple(files)))
            sha, message, files, in_message = line[len(HEADER):], [], [], True
        elif sha is None:
            continue
        elif in_message and line:
            message.append(line[1:])
        elif line:
            files.append(line)
        else:
            in_message = False
    if sha is not None:
        commits.append(Commit(sha, "\n".join(message).strip(), tuple(files)))
    return commits


def _shallow(root: Path, settings: Settings) -> bool:
    try:
        done = run_git(_location(settings, root), "rev-parse", "--is-shallow-repository",
                       cwd=root, timeout_s=GIT_TIMEOUT_S, max_stdout_bytes=64)
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
    # "v3": a stored log holds each commit's id, read by id later; logs stored
    # before the ids were checked (v2) or kept (v1) are not read.
    if settings.history_git_dir:
        return f"history:v3:{settings.history_git_dir}:{rev}:{n}"
    if repo.base is None:
        return None
    # HEAD moves: key the repository's own log by the commit it names now.
    return f"history:v3:{repo.root}:{repo.base if rev == 'HEAD' else rev}:{n}"


def _stored_log(repo: Repo, settings: Settings, key: str) -> Log:
    stored = repo.index.derived(key)
    if stored is not None:
        return Log(tuple(Commit(h, m, tuple(f)) for h, m, f in json.loads(stored)), None)
    log = read_log(repo.root, settings)
    if log.trouble is None:
        # A read-only index: the log is read from git again next time.
        with contextlib.suppress(sqlite3.Error):
            repo.index.store_derived(
                key, json.dumps([[c.sha, c.message, c.files] for c in log.commits])
            )
    return log


def best_commits(query: Query, log: Log, settings: Settings) -> list[tuple[float, int]]:
    """The ``history_top_commits`` commits whose messages best match the task, as
    (BM25 score, index in the log), best first."""
    terms = content_terms(query.task_text)
    if not terms or not log.commits:
        return []
    goal = set(tokenize(query.goal_hint))
    weights = {t: settings.goal_weight if t in goal else 1.0 for t in terms}
    n = len(log.commits)
    idfs = {t: idf(n, len(log.postings.get(t, ()))) for t in weights}
    totals = postings_scores(
        weights, idfs, log.postings, log.lengths, settings.bm25_k1, settings.bm25_b
    )
    best = sorted(((v, i) for i, v in totals.items() if v > 0), key=lambda s: (-s[0], s[1]))
    return best[: settings.history_top_commits]


def file_scores(log: Log, best: list[tuple[float, int]]) -> dict[str, float]:
    """Each file's share of the evidence of the ``best`` commits (see
    :func:`best_commits`), in [0, 1]."""
    totals: dict[str, float] = {}
    for value, i in best:
        files = log.commits[i].files
        for path in files:
            totals[path] = totals.get(path, 0.0) + value / math.sqrt(len(files))
    # A file many commits change (a registry, a changelog) sits in any set of
    # commits: its votes count less, by the square root of its changes.
    totals = {path: total / math.sqrt(log.changes[path]) for path, total in totals.items()}
    return _share_of_best(totals)


def _share_of_best(totals: dict[Key, float]) -> dict[Key, float]:
    top = max(totals.values(), default=0.0)
    return {key: total / top for key, total in totals.items()} if top else {}


def hunk_name(header: str) -> str | None:
    """The name of the definition a hunk header's function line declares."""
    variable = VARIABLE.match(header)
    if variable:
        return variable.group(1)
    for name in CALL_SHAPED.findall(header):
        if name not in NOT_NAMES:
            return str(name)
    declared = DECLARED.search(header)
    return declared.group(1) if declared else None


def changed_definitions(
    repo: Repo, settings: Settings, shas: list[str]
) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each commit's changed definitions as (path, name), from the index or from
    one bounded ``git show``; a commit git's output did not reach is left out."""
    found: dict[str, tuple[tuple[str, str], ...]] = {}
    for sha in shas:
        stored = repo.index.derived(f"changed:{sha}")
        if stored is not None:
            found[sha] = tuple((path, name) for path, name in json.loads(stored))
    # Ids come from git's own log; one that is not a full hex id is never asked
    # for, so nothing read from a repository can reach git as an option.
    missing = [sha for sha in shas if sha not in found and object_id(sha)]
    if not missing:
        return found
    try:
        shown = [_show(repo, settings, missing, GIT_TIMEOUT_S)]
        if shown[0].returncode not in (0, None):
            # One diff git cannot read (a blob the clone lacks) fails the whole
            # call: each commit alone, so only that one is left out, all of
            # them within one more deadline.
            shown, started = [], time.monotonic()
            for sha in missing:
                left = GIT_TIMEOUT_S - (time.monotonic() - started)
                if left <= 0:
                    break
                shown.append(_show(repo, settings, [sha], left))
    except OSError:
        return found
    for done in shown:
        if done.returncode not in (0, None):
            continue
        parsed = parse_show(done.stdout.decode("utf-8", "replace"), set(missing))
        if done.stopped is not None and parsed:
            parsed.popitem()  # the last record may be cut
        for sha, changed in parsed.items():
            found[sha] = changed
            with contextlib.suppress(sqlite3.Error):
                repo.index.store_derived(
                    f"changed:{sha}", json.dumps(changed), keep=CHANGED_ENTRIES
                )
    return found


def _show(repo: Repo, settings: Settings, shas: list[str], timeout_s: float) -> ChildResult:
    return run_git(
        _location(settings, repo.root), "-c", f"core.attributesFile={FUNCNAMES}",
        "show", "-U0", "--no-color", "--no-ext-diff", "--no-textconv",
        f"--format={HEADER}%H", *([] if settings.history_git_dir else ["--relative"]),
        "--end-of-options", *shas, "--",
        cwd=repo.root, timeout_s=timeout_s, max_stdout_bytes=settings.history_max_bytes,
    )


def parse_show(text: str, asked: set[str]) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each asked commit's changed definitions, from ``git show -U0
    --format=HEADER%H``, in the order of the output.

    A hunk's header gives how many lines it holds, and those lines are
    skipped whatever they say, so a changed line cannot pass for a file
    header, a hunk or a commit's record.
    """
    parsed: dict[str, dict[tuple[str, str], None]] = {}
    changed: dict[tuple[str, str], None] | None = None
    path: str | None = None
    content = 0  # lines of the current hunk still to skip
    for line in text.split("\n"):
        if content:
            if not line.startswith("\\"):  # "\ No newline at end of file" is no line
                content -= 1
            continue
        sha = object_id(line[len(HEADER):]) if line.startswith(HEADER) else None
        if sha in asked:
            changed, path = parsed.setdefault(sha, {}), None
        elif changed is None:
            continue
        elif line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif hunk := hunk_header(line):
            content = hunk.old_count + hunk.new_count
            name = hunk_name(hunk.section)
            if name is not None and path is not None:
                changed[path, name] = None
    return {sha: tuple(names) for sha, names in parsed.items()}


def definition_scores(
    repo: Repo, settings: Settings, log: Log, best: list[tuple[float, int]]
) -> dict[tuple[str, str], float]:
    """Each definition the ``best`` commits changed, by its share of their
    evidence, keyed (path, simple name), in [0, 1]."""
    voting = [(value, log.commits[i]) for value, i in best
              if len(log.commits[i].files) <= SWEEPING_FILES]
    changed = changed_definitions(repo, settings, [commit.sha for _, commit in voting])
    totals: dict[tuple[str, str], float] = {}
    for value, commit in voting:
        definitions = changed.get(commit.sha, ())
        for key in definitions:
            totals[key] = totals.get(key, 0.0) + value / math.sqrt(len(definitions))
    return _share_of_best(totals)


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    log = log_of(repo, settings)
    trouble = log.trouble
    proposed: tuple[Candidate, ...] = ()
    if settings.signal_weight(DEFINITION, settings.history_definition_weight):
        scores = definition_scores(repo, settings, log, best_commits(query, log, settings))
        best = sorted(scores, key=lambda key: (-scores[key], key))
        proposed = tuple(
            Candidate(node.span, node.kind, node.qualname, (SOURCE,), terms=(name,))
            for path, name in best[:DEFINITION_CANDIDATES]
            for node in repo.index.lookup(name)
            if node.span.path == path and node.kind != "module"
        )
    changelog = running_changelog(repo, log, settings.changelog_share)
    placed = () if changelog is None else (changelog,)
    if trouble is None and not proposed and not placed:
        return None
    return Recall(SOURCE, proposed, () if trouble is None else (trouble,), placed)


def running_changelog(repo: Repo, log: Log, share: float) -> Candidate | None:
    """The head of the release notes the newest commits that changed code most
    often also changed, when they are no code (the index does not hold them)
    and at least ``share`` of ``CHANGELOG_COMMITS`` of them changed them among the newest
    that many (a young repository's first commit, which adds every file,
    is no habit); None when there is none or it cannot be read."""
    code = repo.index.paths() | {path for path, _, _ in repo.index.failures()}
    commits = list(islice((c for c in log.commits if not code.isdisjoint(c.files)),
                          CHANGELOG_COMMITS))
    changed = Counter(
        path for c in commits for path in set(c.files)
        if path not in code and _RELEASE_NOTES.search(path)
    )
    if not changed:
        return None
    # Ties go to the path first in name order, so the choice is the same every run.
    path, count = min(changed.items(), key=lambda item: (-item[1], item[0]))
    source = repo.source(path) if count >= share * CHANGELOG_COMMITS else None
    if source is None or not source.lines:
        return None
    head = Span(path, 1, min(len(source.lines), CHANGELOG_HEAD_LINES))
    return Candidate(head, "lines", None, (CHANGELOG,))


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
        if len(files) > SWEEPING_FILES:
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
    best = best_commits(query, log, settings)
    scores = file_scores(log, best)
    values = tuple(scores.get(c.span.path, 0.0) for c in candidates)
    found = [Signal(SOURCE, values, settings.history_weight, "scale")]
    if settings.signal_weight(COCHANGE, settings.cochange_weight):
        partners = cochange_scores(named_files(query, repo), log)
        found.append(Signal(COCHANGE, tuple(partners.get(c.span.path, 0.0) for c in candidates),
                            settings.cochange_weight, "scale"))
    if settings.signal_weight(DEFINITION, settings.history_definition_weight):
        changed = definition_scores(repo, settings, log, best)
        found.append(Signal(DEFINITION, tuple(
            0.0 if c.kind == "module" or c.qualname is None
            else changed.get((c.span.path, simple_name(c.qualname)), 0.0)
            for c in candidates
        ), settings.history_definition_weight, "scale"))
    return found
