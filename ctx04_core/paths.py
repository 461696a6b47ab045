"""What a repository path says about its file, in any language's conventions."""

from __future__ import annotations

import re

_TEST_DIRS = frozenset({
    "test", "tests", "testing", "__tests__", "spec", "specs", "e2e", "testdata",
})
# Documentation, examples and benchmarks: code that shows or measures the
# library rather than being it; and a web framework's static assets and
# translations (sphinx ships jQuery in themes/basic/static/).
_AUXILIARY_DIRS = frozenset({
    "doc", "docs", "example", "examples", "galleries", "tutorials", "benchmarks", "asv_bench",
    "benches", "static", "locale",
})
# test_x.py, x_test.go, x_tests.rs, x.test.ts, x.spec.js, x_spec.rb, XTest.java,
# XTests.cs, conftest.py
_TEST_FILE = re.compile(
    r"^(test_.*|.*_(tests?|spec)\.[^.]+|.*\.(test|spec)\.[^.]+|.*[a-z0-9]Tests?\.[^.]+"
    r"|conftest\.py)$"
)


def is_test_path(path: str) -> bool:
    """True for a file of tests."""
    *folders, name = path.split("/")
    return bool(_TEST_DIRS.intersection(folders)) or bool(_TEST_FILE.match(name))


def is_auxiliary_path(path: str) -> bool:
    """True for tests, documentation, examples and benchmarks: a change that
    fixes an issue almost never edits them."""
    folders = path.split("/")[:-1]
    return is_test_path(path) or bool(_AUXILIARY_DIRS.intersection(folders))


def nameable(path: str) -> bool:
    """True for a path that is valid UTF-8: one the index can hold and a model can be told.

    Paths come from ripgrep decoded with ``surrogateescape``, so a name that
    is not UTF-8 arrives holding lone surrogates.
    """
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
