"""ctx04 as a user installs it: one version everywhere, a core that requires
its default plugins, and a core installed alone that says what is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from conftest import make_git_repo

from ctx04_core.plugins import NO_RECALL_INSTALLED

ROOT = Path(__file__).resolve().parent.parent
CTX04 = str(Path(sys.executable).parent / "ctx04")
PLUGIN_PROJECTS = sorted(ROOT.glob("plugins/*/pyproject.toml"))
# The one version every distribution has (the first test checks they agree).
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def project(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads(path.read_text())["project"]
    return data


def bundled_requirements(requirements: list[str]) -> dict[str, str]:
    """The ``ctx04*==VERSION`` requirements, name to pinned version."""
    pins = {}
    for requirement in requirements:
        name, sep, pinned = requirement.partition("==")
        if name.startswith("ctx04"):
            assert sep, f"{requirement!r} pins no version"
            pins[name] = pinned
    return pins


def test_every_distribution_has_the_core_version_and_pins_it() -> None:
    core = project(ROOT / "pyproject.toml")
    assert core["version"] == version("ctx04")
    for path in PLUGIN_PROJECTS:
        plugin = project(path)
        assert (plugin["name"], plugin["version"]) == (plugin["name"], core["version"])
        assert bundled_requirements(plugin["dependencies"]) == {"ctx04": core["version"]}


def test_the_core_requires_the_default_set_the_requirements_file_installs() -> None:
    """``pip install ctx04`` and a developer's ``pip install -r requirements.txt``
    give the same plugins."""
    core = project(ROOT / "pyproject.toml")
    required = bundled_requirements(core["dependencies"])
    editable = [
        line.removeprefix("-e ./")
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith("-e ./plugins/")
    ]
    listed = {project(ROOT / folder / "pyproject.toml")["name"] for folder in editable}
    assert set(required) == listed
    assert set(required.values()) == {core["version"]}
    # The optional extras stay out of the default set.
    assert not {"ctx04-meaning", "ctx04-dependence"} & set(required)


def test_version_is_the_installed_metadata() -> None:
    done = subprocess.run([CTX04, "--version"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"ctx04 {VERSION}\n", "")
    assert version("ctx04") == VERSION


def test_verbose_version_lists_each_plugin_distribution() -> None:
    done = subprocess.run(
        [CTX04, "--version", "-v"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"ctx04 {VERSION}"
    assert f"ctx04-recall-ripgrep {VERSION}" in lines
    assert f"ctx04-parse-treesitter {VERSION}" in lines
    assert lines[1:] == sorted(lines[1:])


@pytest.fixture(scope="module")
def core_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the core's wheel alone (``--no-deps``), its
    third-party dependencies linked in from this test's own environment:
    no plugin distribution, no network."""
    work = tmp_path_factory.mktemp("core-alone")
    # Through the sdist, as scripts/build_dists.sh builds: no build/ folder is
    # left in the repository for a later build to take stale files from.
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--quiet",
         "--outdir", str(work / "wheels"), str(ROOT)],
        check=True, capture_output=True,
    )
    (wheel,) = (work / "wheels").glob("ctx04-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if "ctx04" not in entry.name.lower():
            (site / entry.name).symlink_to(entry)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True,
    )
    yield venv / "bin" / "ctx04"


def run_alone(ctx04: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ctx04), *args], capture_output=True, text=True, check=False,
        stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "200"},
    )


def test_core_alone_refuses_to_retrieve_in_one_line(core_alone: Path, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "def total():\n    return 1\n"})
    done = run_alone(core_alone, "retrieve", "total is wrong", "--repo", str(repo))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ctx04: error: {NO_RECALL_INSTALLED}\n"
    assert NO_RECALL_INSTALLED == (
        "no recall plugin is installed, so nothing can be found: "
        "pip install ctx04 (its default plugins) or a ctx04-recall-* plugin"
    )


def test_core_alone_mcp_server_refuses_at_start(core_alone: Path, tmp_path: Path) -> None:
    done = run_alone(core_alone, "mcp", "--repo", str(tmp_path))
    assert (done.returncode, done.stderr) == (2, f"ctx04: error: {NO_RECALL_INSTALLED}\n")


def test_core_alone_plugins_marks_the_missing_default_set(core_alone: Path) -> None:
    done = run_alone(core_alone, "plugins")
    assert done.returncode == 0, done.stderr
    missing = [line.split("│")[3].strip() for line in done.stdout.splitlines()
               if line.rstrip().endswith("missing │")]
    assert missing == [
        "ctx04-door", "ctx04-expand-members", "ctx04-history", "ctx04-parse-treesitter",
        "ctx04-query-model", "ctx04-recall-apidesc", "ctx04-recall-bm25",
        "ctx04-recall-callgraph", "ctx04-recall-ripgrep", "ctx04-recall-traceback",
        "ctx04-tests-to-code", "ctx04-vet",
    ]
    assert done.stdout.endswith(
        "12 of ctx04's default plugins missing: pip install ctx04 installs them\n"
    )


def test_core_alone_version_is_its_wheel_metadata(core_alone: Path) -> None:
    done = run_alone(core_alone, "--version", "-v")
    assert (done.returncode, done.stdout) == (0, f"ctx04 {VERSION}\n")


def test_every_recall_plugin_disabled_is_one_line_too(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "def total():\n    return 1\n"})
    recall = ["apidesc", "bm25", "callgraph", "history", "pin", "ripgrep", "tests", "traceback",
              "worker_exit"]
    done = subprocess.run(
        [CTX04, "retrieve", "total is wrong", "--repo", str(repo),
         *(arg for name in recall for arg in ("--disable", name))],
        capture_output=True, text=True, check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ctx04: error: every recall plugin is disabled ({', '.join(recall)}), "
        "so nothing can be found: enable one\n"
    )
