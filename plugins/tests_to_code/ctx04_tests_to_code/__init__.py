"""Tests to code: the definitions that the tests a task names import and call.

A task that says which test fails (``--test``, a ``path::name`` id in its
text) tells where the fault is only through what that test exercises: the
test itself is seldom what a fix edits, the code it calls is.

Seeds: each test id's function (``tests/test_a.py::TestB::test_c[1]`` ->
``test_c`` in that file; in any test file when that file is not indexed),
from ``--test`` and from the ids the task text writes. A test function or a
test file the task only names in prose is not a seed: on the dev split those
are mostly the reporter's own reproduction (``test_view``) or a file a
proposed fix touches, and seeding them cost MRR (docs/benchmarks.md).

Targets: one hop from each seed in the code index, outside test files: the
definitions its calls name and the repository definitions it imports and
uses. An import names its target exactly and is worth 1; a call names it by
simple name, and each of the n definitions outside tests that share the name
is worth ``1 / n``, so a test's ``run()`` counts little and its
``parse_header()`` fully.

Recall proposes the targets, best worth first, then by position; at most
``settings.tests_limit``, with ``Diagnostic(kind="unavailable",
reason="truncated")`` past it. The ``tested`` signal scales each candidate
by ``1 + settings.tested_boost * worth`` (0 for a candidate no seed reaches).
"""

from __future__ import annotations

from ctx04_core.graph import by_position, callees, definitions, imported, node_recall
from ctx04_core.hookspecs import hookimpl
from ctx04_core.paths import is_test_path
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Node, Query, Recall, Signal

SOURCE = "tests"


def seeds(query: Query, repo: Repo) -> list[Node]:
    """The test definitions the query's test ids name, in order, each once."""
    found: dict[Node, None] = {}
    for test_id in query.test_names:
        path, _, rest = test_id.partition("::")
        name = rest.rsplit("::", 1)[-1].split("[", 1)[0]
        tests = [n for n in definitions(repo.index.lookup(name)) if is_test_path(n.span.path)]
        in_file = [n for n in tests if _same_file(path, n.span.path)]
        found.update(dict.fromkeys(by_position(in_file or tests)))
    return list(found)


def targets(query: Query, repo: Repo) -> dict[Node, float]:
    """Every definition outside tests one hop from a seed, with its worth, in seed order."""
    worth: dict[Node, float] = {}
    for seed in seeds(query, repo):
        # A call names its target by simple name: each namesake outside tests
        # shares the worth; an import names it exactly.
        reached: list[tuple[Node, float]] = []
        for named in callees(repo, seed):
            code = [n for n in named if not is_test_path(n.span.path)]
            reached += [(node, 1 / len(code)) for node in by_position(code)]
        code = [n for n in imported(repo, seed) if not is_test_path(n.span.path)]
        reached += [(node, 1.0) for node in by_position(code)]
        for node, value in reached:
            worth[node] = max(worth.get(node, 0.0), value)
    return worth


def _same_file(named: str, indexed: str) -> bool:
    """A path the task wrote (``a/tests/x.py`` of a diff, ``x.py`` alone) and the
    indexed one it means."""
    return named == indexed or named.endswith("/" + indexed) or indexed.endswith("/" + named)


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    worth = targets(query, repo)
    if not worth:
        return None
    chosen = sorted(worth, key=lambda n: -worth[n])  # stable: position order within a worth
    return node_recall(
        SOURCE, chosen, settings.tests_limit, "definitions the named tests reach"
    )


@hookimpl
def signals(
    query: Query, candidates: tuple[Candidate, ...], repo: Repo, settings: Settings
) -> list[Signal] | None:
    worth: dict[tuple[str, str | None], float] = {
        (n.span.path, n.qualname): w for n, w in targets(query, repo).items()
    }
    if not worth:
        return None
    values = tuple(worth.get((c.span.path, c.qualname), 0.0) for c in candidates)
    return [Signal("tested", values, settings.tested_boost, "scale")]
