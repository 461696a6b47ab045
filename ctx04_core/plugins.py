"""Finding and choosing plugins: one plugin manager, entry points, a disable list."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import (
    EntryPoint,
    PackageNotFoundError,
    distribution,
    entry_points,
    requires,
)

import pluggy

from ctx04_core import hookspecs

ENTRY_POINT_GROUP = "ctx04"
DISABLE_ENV = "CTX04_DISABLE"
CORE_DISTRIBUTION = "ctx04"
# Bundled plugin distributions are named ctx04-*; the core's own requirements
# on them (pyproject.toml) are the default set, read back from its metadata.
BUNDLED_PREFIX = "ctx04-"
NO_RECALL_INSTALLED = (
    "no recall plugin is installed, so nothing can be found: "
    "pip install ctx04 (its default plugins) or a ctx04-recall-* plugin"
)


class PluginError(ValueError):
    """A plugin name that no installed distribution provides, a missing stage, or
    a plugin that cannot work as configured (a model it cannot load)."""


@dataclass(frozen=True)
class PluginInfo:
    name: str
    hooks: tuple[str, ...]
    distribution: str
    version: str
    enabled: bool


def installed_entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def disabled_from_env() -> set[str]:
    return {name.strip() for name in os.environ.get(DISABLE_ENV, "").split(",") if name.strip()}


def plugin_manager(
    disable: Iterable[str] = (), only: Iterable[str] | None = None
) -> pluggy.PluginManager:
    """Load the ``ctx04`` entry points, minus the disabled ones.

    ``disable`` adds to the names in ``CTX04_DISABLE``; ``only``, when given,
    loads just those entry points (an agent harness choosing its stages).
    """
    installed = installed_entry_points()
    blocked = set(disable) | disabled_from_env()
    if only is not None:
        chosen = set(only)
        _check_known(chosen, installed)
        blocked |= set(installed) - chosen
    _check_known(blocked, installed)
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in sorted(blocked):
        pm.set_blocked(name)
    pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    return pm


def given_or_chosen(
    plugins: pluggy.PluginManager | None, disable: Iterable[str], only: Iterable[str] | None,
    caller: str,
) -> pluggy.PluginManager:
    """The ``plugins`` a long-lived caller loaded once, else :func:`plugin_manager`
    of ``disable`` / ``only``; giving both is an error (which would win?)."""
    if plugins is None:
        return plugin_manager(disable=disable, only=only)
    if tuple(disable) or only is not None:
        raise ValueError(f"{caller}: give loaded plugins or disable/only, not both")
    return plugins


def loaded_plugins(disable: Iterable[str] = ()) -> pluggy.PluginManager:
    """:func:`plugin_manager` loaded once per process (per disable list and
    ``CTX04_DISABLE``), for a process that runs many tasks: a plugin installed
    while it runs is not picked up halfway, nor can it break the later tasks."""
    return _loaded(tuple(sorted(set(disable) | disabled_from_env())))


@functools.cache
def _loaded(disabled: tuple[str, ...]) -> pluggy.PluginManager:
    return plugin_manager(disable=disabled)


def enabled_plugins(pm: pluggy.PluginManager) -> tuple[str, ...]:
    """Names of the loaded (not blocked) entry-point plugins, sorted.

    Read from what ``pm`` loaded, not from the installed entry points again:
    a plugin installed since then is not part of ``pm``.
    """
    return tuple(sorted(
        name for plugin, _ in pm.list_plugin_distinfo()
        if pm.is_registered(plugin) and (name := pm.get_name(plugin)) is not None
    ))


def require_recall(pm: pluggy.PluginManager) -> None:
    """Refuse to run without a ``recall`` implementation: the pipeline would
    answer every task with an empty slice, which reads like "no relevant code"."""
    if pm.hook.recall.get_hookimpls():
        return
    disabled = [
        name for name in sorted(installed_entry_points())
        if pm.is_blocked(name) and "recall" in _declared_hooks(name)
    ]
    if disabled:
        raise PluginError(
            f"every recall plugin is disabled ({', '.join(disabled)}), "
            "so nothing can be found: enable one"
        )
    raise PluginError(NO_RECALL_INSTALLED)


def missing_default_distributions() -> list[str]:
    """The core's default plugin distributions that are not installed (a
    ``pip install --no-deps ctx04``, or one uninstalled since), sorted."""
    missing = []
    for requirement in requires(CORE_DISTRIBUTION) or ():
        name = re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]
        if not name.startswith(BUNDLED_PREFIX) or ";" in requirement:
            continue
        try:
            distribution(name)
        except PackageNotFoundError:
            missing.append(name)
    return sorted(missing)


def _check_known(names: set[str], installed: dict[str, EntryPoint]) -> None:
    unknown = sorted(names - set(installed))
    if unknown:
        raise PluginError(
            f"no installed plugin named {', '.join(map(repr, unknown))}; "
            f"installed: {', '.join(sorted(installed))}"
        )


def describe_plugins(pm: pluggy.PluginManager) -> list[PluginInfo]:
    """Every installed plugin, loaded or blocked, sorted by name."""
    infos = []
    dist_of = {
        ep.name: (ep.dist.name, ep.dist.version) if ep.dist else ("?", "?")
        for ep in installed_entry_points().values()
    }
    for name, (dist, version) in sorted(dist_of.items()):
        plugin = pm.get_plugin(name)
        hooks: tuple[str, ...] = ()
        if plugin is not None:
            hooks = tuple(sorted(h.name for h in pm.get_hookcallers(plugin) or ()))
        else:
            hooks = _declared_hooks(name)
        infos.append(PluginInfo(name, hooks, dist, version, enabled=plugin is not None))
    return infos


def _declared_hooks(name: str) -> tuple[str, ...]:
    """The hooks a blocked plugin would implement, found by importing it."""
    module = installed_entry_points()[name].load()
    declared = {n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), "ctx04_spec")}
    return tuple(
        sorted(
            n
            for n in declared
            if hasattr(getattr(module, n, None), f"{hookspecs.PROJECT}_impl")
        )
    )
