"""Settings kept in files, layered: command line > environment > repository
file > user file > defaults.

The repository file is ``ctx04.toml`` at the repository's root (its top
level), else the ``[tool.ctx04]`` table of its ``pyproject.toml``; the user
file is ``config.toml`` in the platform's config folder. Either holds any
setting of :class:`~ctx04_core.settings.Settings` by name, and ``disable``, a
list of plugin names. A value is parsed as ``--set NAME=VALUE`` parses its
text, so a file and the command line accept the same values.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import platformdirs

from ctx04_core.plugins import DISABLE_ENV, installed_entry_points
from ctx04_core.regular_file import open_regular_file
from ctx04_core.settings import (
    COMPACT_PROFILE,
    ENV_METADATA,
    SETTING_NAMES,
    Settings,
    SettingsError,
)

REPOSITORY_FILE = "ctx04.toml"
PYPROJECT = "pyproject.toml"
DISABLE = "disable"
DEFAULT = "default"
COMMAND_LINE = "command line"
# A config file is a few lines, a pyproject.toml a few KiB.
MAX_CONFIG_BYTES = 1024 * 1024
# Settings a repository's own file may not set. The repository is untrusted
# (docs/threat-model.md): these choose where ctx04 sends the code it read and
# which environment variable's secret goes with it (the door's model), whether
# the task text goes to a hosted model (the query_model plugin), which file it
# loads and runs as a model, and which git directory it reads. The user file,
# the environment and the command line set them.
USER_ONLY = frozenset({
    "model_url", "model", "model_api_key_env", "model_locality", "hosted_model_sees_task",
    "meaning_encoder", "meaning_model", "ranking_model", "history_git_dir",
})


class ConfigError(SettingsError):
    """A config file that cannot be used: unreadable, not TOML, an unknown key, a bad value."""


@dataclass(frozen=True)
class Configured:
    """The effective settings and plugins to disable, and where each came from."""

    settings: Settings
    # Passed to plugin_manager, which adds CTX04_DISABLE itself; a file's list
    # is here only while CTX04_DISABLE is unset (the environment outranks it).
    disable: tuple[str, ...]
    sources: Mapping[str, str]


def command_line(
    budget_tokens: int | None, compact: bool, assignments: list[str] | None = None
) -> dict[str, Any]:
    """The settings a command's options give: ``--profile compact``'s budgets,
    ``--budget``, then each ``--set NAME=VALUE`` (a later one wins)."""
    given = dict(COMPACT_PROFILE) if compact else {}
    if budget_tokens is not None:
        given["budget_tokens"] = budget_tokens
    return given | Settings().assigned(assignments or [])


def user_config_file() -> Path:
    return platformdirs.user_config_path("ctx04") / "config.toml"


def configured(
    repo: Path,
    command_line: Mapping[str, Any] | None = None,
    command_line_disable: Iterable[str] = (),
) -> Configured:
    """The layers for a repository under the command line's settings and
    ``--disable`` names."""
    base = Settings()  # the defaults, with the CTX04_* variables applied
    chosen: dict[str, Any] = {}
    sources = {f.name: DEFAULT for f in fields(Settings)} | {DISABLE: DEFAULT}
    for where, table, repository_file in _file_layers(repo):
        for name, value in table.items():
            if name in USER_ONLY and repository_file:
                raise ConfigError(
                    f"{where}: {name} cannot be set by a repository's own file (it says "
                    f"where code is sent or what is loaded): set it in {user_config_file()}, "
                    "the environment or the command line"
                )
            chosen[name] = _checked(base, where, name, value)
            sources[name] = where
    for f in fields(Settings):
        variable = f.metadata.get(ENV_METADATA)
        if variable is not None and variable in os.environ:
            chosen.pop(f.name, None)
            sources[f.name] = f"environment {variable}"
    file_disable: tuple[str, ...] = chosen.pop(DISABLE, ())
    if DISABLE_ENV in os.environ:
        file_disable = ()
        sources[DISABLE] = f"environment {DISABLE_ENV}"
    # --disable adds to the list, as it adds to CTX04_DISABLE.
    if tuple(command_line_disable):
        below = sources[DISABLE]
        sources[DISABLE] = COMMAND_LINE if below == DEFAULT else f"{COMMAND_LINE} + {below}"
    disable = tuple(dict.fromkeys([*command_line_disable, *file_disable]))
    settings = base.with_overrides(**(chosen | dict(command_line or {})))
    sources.update(dict.fromkeys(command_line or {}, COMMAND_LINE))
    return Configured(settings, disable, sources)


def _file_layers(repo: Path) -> list[tuple[str, Mapping[str, Any], bool]]:
    """(where, table, whether the repository wrote it) of the user file, then
    the repository's, lowest first."""
    layers: list[tuple[str, Mapping[str, Any], bool]] = []
    user = user_config_file()
    if user.is_file():
        layers.append((f"user file {user}", _read_toml(user), False))
    own = repo / REPOSITORY_FILE
    pyproject = repo / PYPROJECT
    if own.is_file():
        layers.append((f"repository file {own}", _read_toml(own), True))
    elif pyproject.is_file():
        table = _read_toml(pyproject).get("tool", {}).get("ctx04")
        where = f"repository file {pyproject} [tool.ctx04]"
        if table is not None and not isinstance(table, dict):
            raise ConfigError(f"{where}: is a table of settings, not {table!r}")
        if table is not None:
            layers.append((where, table, True))
    return layers


def _read_toml(path: Path) -> dict[str, Any]:
    # Opened as a task file is: a FIFO or a device (a repository's file may
    # be a link to one) is refused, never waited on, and no more is read than
    # a config file could need.
    try:
        with open(open_regular_file(path, os.O_RDONLY), "rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: over {MAX_CONFIG_BYTES} bytes, too large to be a config")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


def _checked(base: Settings, where: str, name: str, value: Any) -> Any:
    """A file's value for ``name``, parsed and checked as ``--set`` does."""
    if name == DISABLE:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{where}: disable is a list of plugin names, not {value!r}")
        unknown = sorted(set(value) - set(installed_entry_points()))
        if unknown:
            raise ConfigError(
                f"{where}: disable: no installed plugin named {', '.join(map(repr, unknown))} "
                "(ctx04 plugins lists them)"
            )
        return tuple(value)
    if name not in SETTING_NAMES:
        raise ConfigError(f"{where}: unknown setting {name!r} (ctx04 config lists them)")
    if isinstance(value, dict):
        raise ConfigError(f"{where}: {name} is a value, not a table")
    try:
        parsed = base.parsed(name, _as_text(value))
        base.with_overrides(**{name: parsed})
    except ValueError as err:  # SettingsError, or a check of Settings itself
        raise ConfigError(f"{where}: {err}") from None
    return parsed


def _as_text(value: Any) -> str:
    """A TOML value as the text ``--set NAME=VALUE`` would give."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_as_text(item) for item in value)
    return str(value)


def as_toml(value: object) -> str:
    """A setting's value as a config file writes it (None as "none", which it parses)."""
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(as_toml(item) for item in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)
