"""Reading the benchmark's inputs: SWE-bench JSON Lines, an id list, the repo map.

An instance may carry a ``language`` (SWE-bench Multilingual has none of its
own; ctx04's dev_multilingual split labels each task): runs then summarise
per language too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

FIELDS = ("instance_id", "repo", "base_commit", "problem_statement", "patch")


class DatasetError(ValueError):
    """A dataset, id list or repo map that cannot be used; the message says where."""


@dataclass(frozen=True)
class Instance:
    instance_id: str
    repo: str  # GitHub owner/name
    base_commit: str
    problem_statement: str
    patch: str  # the gold diff, a/ and b/ prefixes
    language: str | None = None  # the task's programming language, when the dataset says


def load_instances(
    path: Path, ids_file: Path | None = None, limit: int | None = None
) -> list[Instance]:
    """The dataset's instances in file order, only ``ids_file``'s ids, then the first ``limit``."""
    instances = [_instance(path, n, line) for n, line in enumerate(_lines(path), 1) if line.strip()]
    seen: set[str] = set()
    for instance in instances:
        if instance.instance_id in seen:
            raise DatasetError(f"{path}: instance {instance.instance_id!r} appears twice")
        seen.add(instance.instance_id)
    if ids_file is not None:
        wanted = [i.strip() for i in _lines(ids_file) if i.strip() and not i.startswith("#")]
        unknown = sorted(set(wanted) - seen)
        if unknown:
            raise DatasetError(
                f"{ids_file}: {len(unknown)} id(s) not in {path}: {', '.join(unknown[:5])}"
            )
        keep = set(wanted)
        instances = [i for i in instances if i.instance_id in keep]
    return instances if limit is None else instances[:limit]


def load_repo_map(path: Path) -> dict[str, Path]:
    """``{"owner/name": "/path/to/git-dir"}``; relative paths are taken from the map's folder.

    The paths returned are absolute: git runs in other folders, and workers
    on other machines (``--executor ray``) are given them as they are.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise DatasetError(f"cannot read the repo map {path}: {err.strerror or err}") from err
    except json.JSONDecodeError as err:
        raise DatasetError(f"{path}: not JSON ({err})") from err
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise DatasetError(f"{path}: expected an object mapping owner/name to a git directory")
    return {
        repo: (path.parent / Path(where).expanduser()).absolute() for repo, where in data.items()
    }


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise DatasetError(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path}: not UTF-8 ({err})") from err


def _instance(path: Path, number: int, line: str) -> Instance:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise DatasetError(f"{path}:{number}: not JSON ({err})") from err
    if not isinstance(data, dict):
        raise DatasetError(f"{path}:{number}: expected a JSON object")
    missing = [f for f in FIELDS if not isinstance(data.get(f), str)]
    if missing:
        raise DatasetError(f"{path}:{number}: missing or non-string field(s) {', '.join(missing)}")
    language = data.get("language")
    if language is not None and not isinstance(language, str):
        raise DatasetError(f"{path}:{number}: field language is not a string")
    return Instance(**{f: data[f] for f in FIELDS}, language=language)
