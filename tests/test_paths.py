"""What a path says about its file, in each language's conventions."""

from __future__ import annotations

import pytest

from ctx04_core.paths import is_auxiliary_path, is_test_path


@pytest.mark.parametrize("path", [
    "tests/test_models.py", "pkg/conftest.py", "src/x/__tests__/a.js", "lib/parser_test.go",
    "src/thing_tests.rs", "web/app.test.ts", "web/app.spec.tsx", "spec/models/user_spec.rb",
    "src/test/java/com/x/GsonTest.java", "tests/Unit/KernelTest.php", "cmd/testdata/in.go",
])
def test_test_files(path: str) -> None:
    assert is_test_path(path)
    assert is_auxiliary_path(path)


@pytest.mark.parametrize("path", [
    "src/models.py", "lib/contest.rb", "src/latest.go", "src/main/java/com/x/Gson.java",
    "lib/inspect.js", "src/Attestation.php", "specification.py", "lib/specs.rb",
])
def test_source_files(path: str) -> None:
    assert not is_test_path(path)
    assert not is_auxiliary_path(path)


@pytest.mark.parametrize("path", [
    "docs/conf.py", "examples/basic/main.go", "benches/parse.rs", "benchmarks/bench_x.py",
    "sphinx/themes/basic/static/doctools.js", "sphinx/locale/ja/LC_MESSAGES/sphinx.js",
])
def test_auxiliary_files_that_are_not_tests(path: str) -> None:
    assert not is_test_path(path)
    assert is_auxiliary_path(path)
