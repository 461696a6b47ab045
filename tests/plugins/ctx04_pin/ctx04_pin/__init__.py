"""A third-party recall plugin: code marked ``# ctx04: pin`` is always proposed.

A team marks the lines a model should always consider (a fragile invariant,
a central config) with the comment ``# ctx04: pin``; this plugin proposes
each marked line as a hit, whatever the task, and ctx04's merge widens the
hit to its enclosing definition. It also contributes the ranking signal
``pin`` (1 for a candidate holding a marked line, else 0) that scales the
fused score by ``1 + PIN_WEIGHT``; ``--set signal_weights=pin=W`` tunes it.
It uses only ctx04's public pieces: the hook marker, the data types and the
bundled ripgrep.

Cap: at most ``settings.hits_per_term`` marked lines, in path order; more are
reported as truncated.
"""

from __future__ import annotations

import base64
import json
import subprocess

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.ripgrep import exclusion_args, glob_args, rg_binary
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate, Diagnostic, Recall, Signal, Span

SOURCE = "pin"
MARKER = "# ctx04: pin"
PIN_WEIGHT = 1.0


def _path(field: dict[str, str]) -> str:
    # rg's JSON gives a path that is not valid UTF-8 as base64 bytes.
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode("utf-8", "surrogateescape")


def search_pins(repo: Repo, settings: Settings) -> Recall:
    """Every marked line in path order, up to the cap; a cut or failure is reported."""
    done = subprocess.run(
        [rg_binary(), "--json", "--sort", "path", "--no-config", "-F", "-e", MARKER, ".",
         *exclusion_args(settings.exclude_globs), *glob_args(repo.globs)],
        cwd=repo.root, capture_output=True, timeout=settings.search_timeout_s, check=False,
    )
    found: list[tuple[str, int]] = []
    for record in done.stdout.splitlines():
        event = json.loads(record)
        if event["type"] == "match":
            data = event["data"]
            found.append((_path(data["path"]).removeprefix("./"), data["line_number"]))
    cap = settings.hits_per_term
    candidates = tuple(
        Candidate(Span(path, line, line), "line", None, (SOURCE,), hit_lines=(line,))
        for path, line in found[:cap]
    )
    diagnostics: list[Diagnostic] = []
    if len(found) > cap:
        diagnostics.append(Diagnostic("unavailable", "truncated", detail=f"more than {cap} pins"))
    if done.returncode not in (0, 1):  # 1 is "no match"
        message = done.stderr.decode("utf-8", "replace").strip()
        diagnostics.append(Diagnostic("unavailable", "search_failed", detail=message))
    return Recall(SOURCE, candidates, tuple(diagnostics))


@hookimpl
def recall(repo: Repo, settings: Settings) -> Recall | None:
    # The pins do not depend on the task, so this takes only the hook
    # arguments it needs (pluggy passes a subset by name).
    if not repo.globs:
        return None
    try:
        return search_pins(repo, settings)
    except subprocess.TimeoutExpired:
        return Recall(SOURCE, (), (Diagnostic("unavailable", "timeout", detail=MARKER),))


@hookimpl
def signals(candidates: tuple[Candidate, ...]) -> list[Signal]:
    values = tuple(float(SOURCE in c.sources) for c in candidates)
    return [Signal(SOURCE, values, PIN_WEIGHT, "scale")]
