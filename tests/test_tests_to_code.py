"""Tests to code: the definitions a named test calls and imports, over a real index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ctx04_tests_to_code as tests_to_code
from conftest import make_git_repo

from ctx04_core.pipeline import retrieve
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Diagnostic, Query, Recall, Span

Indexed = Callable[..., Repo]

CODEC: dict[str, str | bytes] = {
    "codec/__init__.py": "",
    "codec/headers.py": (
        "def parse_header(raw):\n"                      # 1
        "    return split(raw)\n"
        "\n"
        "\n"
        "def split(raw):\n"                             # 5
        "    return raw.split(':')\n"
        "\n"
        "\n"
        "def run(raw):\n"                               # 9
        "    return raw\n"
    ),
    "codec/body.py": (
        "class Body:\n"                                 # 1
        "    def decode(self, data):\n"                 # 2
        "        return data\n"
        "\n"
        "\n"
        "def run(data):\n"                              # 6
        "    return data\n"
    ),
    "tests/test_headers.py": (
        "from codec.body import Body\n"                 # 1
        "from codec.headers import parse_header, run\n"
        "\n"
        "\n"
        "def test_folded_header():\n"                   # 5
        "    assert parse_header('a: b') == ['a', ' b']\n"
        "    run('x')\n"
        "\n"
        "\n"
        "def test_body():\n"                            # 10
        "    body = Body()\n"
        "    assert body.decode(b'') == b''\n"
        "\n"
        "\n"
        "class Book:\n"  # an issue's example model, defined in tests too
        "    title = parse_header('t: x')\n"
    ),
}


def query(*, tests: tuple[str, ...] = (), identifiers: tuple[str, ...] = (),
          paths: tuple[str, ...] = ()) -> Query:
    return Query(
        task_text="", identifiers=identifiers, unresolved=(), error_strings=(),
        test_names=tests, file_paths=paths, goal_hint="",
    )


def reached(repo: Repo, q: Query) -> list[tuple[str, float]]:
    return [(node.qualname, worth) for node, worth in tests_to_code.targets(q, repo).items()]


def test_a_test_id_leads_to_what_its_function_calls_and_imports(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", CODEC))
    q = query(tests=("tests/test_headers.py::test_folded_header",))
    # The call ``run()`` names two definitions, each worth half; the import
    # says which one the test means. ``split`` is two hops away: not reached.
    assert reached(repo, q) == [
        ("codec.headers.parse_header", 1.0),
        ("codec.body.run", 0.5),
        ("codec.headers.run", 1.0),
    ]
    result = tests_to_code.recall(query=q, repo=repo, settings=Settings())
    assert result == Recall("tests", (
        Candidate(Span("codec/headers.py", 1, 2), "function", "codec.headers.parse_header",
                  ("tests",)),
        Candidate(Span("codec/headers.py", 9, 10), "function", "codec.headers.run", ("tests",)),
        Candidate(Span("codec/body.py", 6, 7), "function", "codec.body.run", ("tests",)),
    ), ())


def test_a_test_named_only_in_prose_is_not_a_seed(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", CODEC))
    # A test function's name, a class defined only in tests, a test file's path.
    q = query(identifiers=("test_body", "Book"), paths=("b/tests/test_headers.py",))
    assert reached(repo, q) == []
    # The same test as an id in any file, when its own file is not named right.
    assert reached(repo, query(tests=("elsewhere/test_x.py::test_body",))) == [
        ("codec.body.Body", 1.0),
        ("codec.body.Body.decode", 1.0),
    ]


def test_no_test_named_means_no_candidate_and_no_signal(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", CODEC))
    # parse_header is code, not a test: not a seed.
    q = query(identifiers=("parse_header",), paths=("codec/headers.py",))
    assert tests_to_code.recall(query=q, repo=repo, settings=Settings()) is None
    assert tests_to_code.signals(query=q, candidates=(), repo=repo, settings=Settings()) is None


def test_the_cap_keeps_the_most_telling_targets(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", CODEC))
    q = query(tests=("tests/test_headers.py::test_folded_header",))
    result = tests_to_code.recall(query=q, repo=repo, settings=Settings(tests_limit=1))
    assert result is not None
    assert [c.qualname for c in result.candidates] == ["codec.headers.parse_header"]
    assert result.diagnostics == (
        Diagnostic("unavailable", "truncated",
                   detail="3 definitions the named tests reach, kept the first 1"),
    )


def test_the_tested_signal_lifts_the_code_under_test_in_a_retrieval(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", CODEC)
    task = "a header folded over two lines is not parsed"
    settings = Settings()
    test = "tests/test_headers.py::test_folded_header"
    with_tests = retrieve(task, root, test=test, settings=settings)
    without = retrieve(task, root, test=test, settings=settings, disable=("tests",))
    ranked = {r.candidate.qualname: dict(r.signals) for r in with_tests.candidates}
    assert ranked["codec.headers.parse_header"]["tested"] == 1.0
    assert ranked["codec.headers.run"]["tested"] == 1.0
    assert ranked["codec.body.run"]["tested"] == 0.5
    assert all("tested" not in dict(r.signals) for r in without.candidates)
