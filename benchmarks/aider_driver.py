"""Times aider's repository map on a list of tasks; run by bench_aider.py with the
Python of aider's own virtual environment, never imported into ctx04's.

Usage (bench_aider.py does this): ``AIDER_VENV/bin/python aider_driver.py JOB.json OUT.json``
with the working directory set to the tree copy aider may write its tags cache into.

The job names the root, the files of the map (absolute paths), the token budget,
the number of runs and, per task, the mentioned file names and identifiers.
No model is used: token counts come from tiktoken's cl100k_base (the encoding
ctx04 counts with), loaded from the copy that litellm ships inside aider's
environment, so nothing is downloaded; without it, 4 characters a token.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any


class TokenModel:
    """The one method RepoMap asks of ``main_model``: ``token_count(text)``."""

    def __init__(self) -> None:
        self.encoding: Any = None
        self.name = "4 characters a token"
        spec = importlib.util.find_spec("litellm")
        if spec is None or not spec.submodule_search_locations:
            return
        bundled = Path(next(iter(spec.submodule_search_locations)))
        bundled = bundled / "litellm_core_utils" / "tokenizers"
        # tiktoken looks for its files here before going to the network.
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
        try:
            import tiktoken

            self.encoding = tiktoken.get_encoding("cl100k_base")
            self.name = f"tiktoken {version('tiktoken')} cl100k_base"
        except Exception as err:  # any failure means: fall back, and say so
            print(f"tiktoken unavailable ({err}); counting 4 characters a token", file=sys.stderr)

    def token_count(self, text: str) -> int | float:
        if self.encoding is None:
            return len(text) / 4
        return len(self.encoding.encode(text, disallowed_special=()))


class QuietIO:
    """The parts of aider's InputOutput that RepoMap calls, without a terminal."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def read_text(self, filename: str, silent: bool = False) -> str | None:
        # aider's InputOutput.read_text: the whole file as UTF-8, None when unreadable.
        try:
            with open(filename, encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeError) as err:
            if not silent:
                self.warnings.append(f"{filename}: {err}")
            return None

    def tool_output(self, *messages: object, **_: object) -> None:
        pass

    def tool_warning(self, message: str = "", **_: object) -> None:
        self.warnings.append(message)

    def tool_error(self, message: str = "", **_: object) -> None:
        self.warnings.append(message)


def main(job_path: str, out_path: str) -> None:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    from aider.repomap import RepoMap

    model = TokenModel()
    io = QuietIO()
    # refresh="always": every call computes the map. aider's default ("auto")
    # memoises a slow map per identical input, which would time a dict lookup,
    # and an agent's next step mentions different files and identifiers anyway.
    repo_map = RepoMap(
        map_tokens=job["map_tokens"], root=job["root"], main_model=model, io=io,
        refresh="always",
    )
    files = job["files"]
    results = []
    cold_seconds = None
    for number, task in enumerate(job["tasks"]):
        fnames, idents = set(task["mentioned_fnames"]), set(task["mentioned_idents"])

        def call(fnames: set[str] = fnames, idents: set[str] = idents) -> str | None:
            result: str | None = repo_map.get_repo_map([], files, fnames, idents)
            return result

        started = time.perf_counter()
        text = call()
        first = time.perf_counter() - started
        if number == 0:
            # The very first call fills .aider.tags.cache (tree-sitter parses every file).
            cold_seconds = first
        for _ in range(job["warmup"] - 1):
            call()
        samples, cpu = [], []
        for _ in range(job["runs"]):
            # process_time: this process's CPU, which other load on the machine
            # inflates far less than the wall clock.
            cpu_started, started = time.process_time(), time.perf_counter()
            text = call()
            samples.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
        text = text or ""
        results.append({
            "id": task["id"], "samples": samples, "cpu": cpu, "map_chars": len(text),
            "map_tokens": model.token_count(text),
            # The map lists each file as a line of its own; its code lines start with
            # a box-drawing bar and elisions with a vertical ellipsis.
            "map_files": sum(1 for line in text.splitlines() if line and line[0] not in "│⋮"),
        })
    versions = {}
    for dist in ("aider-chat", "tree-sitter", "tree-sitter-language-pack", "grep-ast",
                 "networkx", "scipy", "diskcache"):
        try:
            versions[dist] = version(dist)
        except Exception:
            versions[dist] = "not installed"
    Path(out_path).write_text(json.dumps({
        "versions": versions, "python": sys.version.split()[0], "token_counter": model.name,
        "cold_seconds": cold_seconds, "tasks": results, "warnings": io.warnings[:20],
    }), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
