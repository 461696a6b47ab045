"""ctx04 as a user installs it: one version everywhere, a core that requires
its default plugins."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_PROJECTS = sorted(ROOT.glob("plugins/*/pyproject.toml"))


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
