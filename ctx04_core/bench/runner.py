"""Running one system over a dataset: tree, gold, answer and metrics per instance.

Each instance is one JSON line in the output file, written as soon as it is
scored, so a long run's finished instances survive an interruption. An
instance whose tree, gold or retrieval fails, or whose worker died on every
attempt (see :mod:`ctx04_core.executors`), is recorded with its ``error``
and scored as a retrieval that returned nothing; the run goes on.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from ctx04_core.bench.dataset import Instance
from ctx04_core.bench.gold import file_definitions, gold_from_patch
from ctx04_core.bench.metrics import FAILED, Answer, Covered, RankedItem, Symbol, score
from ctx04_core.bench.systems import BM25_SETTINGS, SYSTEMS, run_bm25, run_ctx04
from ctx04_core.bench.trees import Tree, default_cache_dir, materialise, tree_dir
from ctx04_core.executors import Executor, WorkerLost, run_tasks
from ctx04_core.graph import nested_in
from ctx04_core.plugins import PluginError, disabled_from_env, enabled_plugins, loaded_plugins
from ctx04_core.ranking.model import fold_model_path
from ctx04_core.settings import LEARNED, Settings
from ctx04_core.stages.regions import runs


class RunError(ValueError):
    """The run cannot start: an unknown system or plugin, a missing package."""


@dataclass(frozen=True)
class RunConfig:
    system: str = "ctx04"
    settings: Settings = field(default_factory=Settings)
    disable: tuple[str, ...] = ()
    cache_dir: Path = field(default_factory=default_cache_dir)
    # Where the instances run; each is independent of the others.
    executor: Executor = field(default_factory=Executor)
    # Each instance ranked by the model fitted without its repository
    # (``ctx04 train --fold-models``), so training tasks read held out.
    fold_models: Path | None = None


@dataclass(frozen=True)
class _Header:
    """What every record of a run shares."""

    system: str
    disabled: list[str]
    plugins: list[str]
    settings: dict[str, Any]


def run(
    instances: Sequence[Instance],
    repos: Mapping[str, Path],
    config: RunConfig,
    out: Path,
    advance: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every instance, writing one record a line to ``out``; returns the records.

    The instances run on ``config.executor``; records are written in dataset
    order all the same, each as soon as it and every one before it are done.
    ``advance`` is called with each record as it finishes.
    """
    header = _header(config)
    if config.fold_models is not None:
        _check_fold_models(instances, config, config.fold_models)
    task = functools.partial(evaluate, repos=dict(repos), config=config, header=header)
    outcomes = run_tasks(config.executor, task, instances)
    out.parent.mkdir(parents=True, exist_ok=True)
    done: list[dict[str, Any] | None] = [None] * len(instances)
    written = 0
    with out.open("w", encoding="utf-8") as sink:
        for index, outcome in outcomes:
            record = (
                _failed(instances[index], header, f"worker: {outcome.message}")
                if isinstance(outcome, WorkerLost) else outcome
            )
            done[index] = record
            if advance is not None:
                advance(record)
            while written < len(done) and (ready := done[written]) is not None:
                sink.write(json.dumps(ready, ensure_ascii=False) + "\n")
                sink.flush()
                written += 1
    return [record for record in done if record is not None]


def _header(config: RunConfig) -> _Header:
    if config.system not in SYSTEMS:
        raise RunError(f"unknown system {config.system!r}; choose from {', '.join(SYSTEMS)}")
    if config.system == "bm25":
        try:
            import bm25s  # noqa: F401
        except ImportError as err:
            raise RunError(
                "the bm25 baseline needs the bm25s package: pip install 'ctx04[bench]'"
            ) from err
        if config.disable:
            raise RunError("--disable chooses ctx04's plugins; the bm25 baseline has none")
        settings = {**BM25_SETTINGS, "budget_tokens": config.settings.budget_tokens}
        return _Header(config.system, [], [], settings)
    disabled = sorted(set(config.disable) | disabled_from_env())
    try:
        pm = loaded_plugins(disabled)
    except PluginError as err:
        raise RunError(str(err)) from err
    settings = config.settings.to_json()
    if config.fold_models is not None:
        settings["fold_models"] = str(config.fold_models)
    return _Header(config.system, disabled, list(enabled_plugins(pm)), settings)


def _check_fold_models(
    instances: Sequence[Instance], config: RunConfig, directory: Path
) -> None:
    """Every instance's repository has its fold model in ``directory``, and the run reads it."""
    if config.system != "ctx04" or config.settings.fusion != LEARNED:
        raise RunError("--fold-models ranks with ctx04's learned fusion; drop --system or "
                       "--set fusion")
    if not directory.is_dir():
        raise RunError(f"--fold-models {directory}: no such folder; write it with "
                       "ctx04 train --fold-models")
    missing = sorted({
        instance.repo for instance in instances
        if not fold_model_path(directory, instance.repo).is_file()
    })
    if missing:
        raise RunError(
            f"--fold-models {directory}: no model for {', '.join(missing)} (as "
            f"{fold_model_path(directory, missing[0]).name}); write them with "
            "ctx04 train --fold-models on these tasks' pools"
        )


def _system_plugins(system: str, header: _Header) -> pluggy.PluginManager:
    if system == "bm25":
        return loaded_plugins()  # the baseline's parsers: all installed
    pm = loaded_plugins(header.disabled)
    if list(enabled_plugins(pm)) != header.plugins:
        # A worker on another machine, or started after a plugin was installed.
        raise RunError(f"this worker's plugins differ: {', '.join(enabled_plugins(pm))}")
    return pm


def _failed(instance: Instance, header: _Header, error: str | None) -> dict[str, Any]:
    """The record of an instance that has no answer: scored as a retrieval that returned nothing."""
    return {
        "instance_id": instance.instance_id, "repo": instance.repo,
        "language": instance.language, "base_commit": instance.base_commit, "system": header.system,
        "disabled": header.disabled, "plugins": header.plugins, "settings": header.settings,
        "gold": None, "ranked": [], "shown": [], "metrics": dict(FAILED), "tokens": 0,
        "seconds": None, "index_seconds": None, "tree_seconds": None, "missing_blobs": [],
        "door": None, "unavailable": [], "error": error,
    }


def evaluate(
    instance: Instance, repos: Mapping[str, Path], config: RunConfig, header: _Header
) -> dict[str, Any]:
    """One instance's record, in this process or a worker."""
    record = _failed(instance, header, None)
    stage = "plugins"
    try:
        pm = _system_plugins(config.system, header)
        stage = "tree"
        tree, git_dir = base_tree(instance, repos, config.cache_dir)
        record["tree_seconds"] = round(tree.seconds, 3)
        record["missing_blobs"] = list(tree.missing)
        stage = "gold"
        # The gold's parsers: all installed, whatever the system disables.
        gold = gold_from_patch(instance.patch, tree.root, loaded_plugins())
        record["gold"] = gold.to_json()
        stage = "retrieval"
        answer = _answer(instance, tree.root, git_dir, config, pm)
    # One instance's failure, whatever it is, must not end a run of hundreds.
    except Exception as err:
        record["error"] = f"{stage}: {type(err).__name__}: {err}"
        return record
    record["ranked"] = [r.to_json() for r in answer.ranked]
    # The shown lines, as runs, so the irrelevant-context ratio can be checked by hand.
    record["shown"] = [
        {"path": s.path, "rank": s.rank, "extra": s.extra,
         "lines": [list(run) for run in runs(list(s.lines))]}
        for s in answer.shown
    ]
    record["metrics"] = score(gold, answer, _covered(tree.root, loaded_plugins()))
    record["tokens"] = answer.tokens
    record["door"] = answer.door
    record["unavailable"] = [{"reason": r, "detail": d} for r, d in answer.unavailable]
    record["seconds"] = round(answer.seconds, 3)
    if answer.index_seconds is not None:
        record["index_seconds"] = round(answer.index_seconds, 3)
    return record


def base_tree(instance: Instance, repos: Mapping[str, Path], cache_dir: Path) -> tuple[Tree, Path]:
    """The instance's base commit materialised in ``cache_dir``, and the mapped git directory.

    Raises LookupError for a repository the map lacks, TreeError when git cannot write it.
    """
    git_dir = repos.get(instance.repo)
    if git_dir is None:
        raise LookupError(f"{instance.repo} is not in the repo map")
    dest = tree_dir(cache_dir.resolve(), instance.repo, instance.base_commit)
    return materialise(git_dir, instance.base_commit, dest), git_dir


def retrieval_settings(instance: Instance, git_dir: Path, settings: Settings) -> Settings:
    """``settings`` for retrieving in the instance's tree: the tree has no .git, so its
    history is the clone's log up to the base commit, never a later commit (the fix
    itself is one)."""
    return settings.with_overrides(history_git_dir=str(git_dir), history_rev=instance.base_commit)


def _covered(tree: Path, pm: pluggy.PluginManager) -> Covered:
    """The definitions inside a ranked container, read from the base tree as
    the gold is."""
    definitions = functools.cache(lambda path: file_definitions(tree, path, pm))

    def covered(item: RankedItem) -> list[Symbol]:
        inside = nested_in(definitions(item.path), item.qualname, item.start_line, item.end_line)
        return [(item.path, node.qualname)
                for node in sorted(inside, key=lambda n: n.span.start_line)]

    return covered


def _answer(
    instance: Instance, root: Path, git_dir: Path, config: RunConfig, pm: pluggy.PluginManager
) -> Answer:
    task = instance.problem_statement
    if config.system == "bm25":
        return run_bm25(task, root, config.settings, pm)
    settings = retrieval_settings(instance, git_dir, config.settings)
    if config.fold_models is not None:
        model = fold_model_path(config.fold_models.resolve(), instance.repo)
        settings = settings.with_overrides(ranking_model=str(model))
    return run_ctx04(task, root, settings, pm)
