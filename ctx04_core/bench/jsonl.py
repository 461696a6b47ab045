"""The benchmark's own JSON files (eval records, e2e calls and reports), read
with one wording of what is wrong: each caller names its error type, and a
message says the file and, for JSON Lines, the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_text(path: Path, error: type[ValueError]) -> str:
    """The file's UTF-8 text; ``error`` with a one-line reason when it cannot be had."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise error(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 ({err})") from err


def json_lines(path: Path, error: type[ValueError]) -> Iterator[tuple[int, Any]]:
    """Each non-blank line's JSON value with its 1-based line number; ``error``
    for an unreadable file or a line that is not JSON."""
    for number, line in enumerate(read_text(path, error).splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as err:
            raise error(f"{path}:{number}: not JSON ({err})") from err
