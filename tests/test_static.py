"""The static checks CI relies on, run as tests so one command runs everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_is_clean() -> None:
    done = run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_on_the_core_and_the_bundled_plugins() -> None:
    packages = ROOT.glob("plugins/*/ctx04_*/__init__.py")
    plugins = sorted(str(p.parent.relative_to(ROOT)) for p in packages)
    assert len(plugins) == 14
    done = run("mypy", "--strict", "ctx04_core", *plugins)
    assert done.returncode == 0, done.stdout + done.stderr
