"""A tiny benchmark built in the test: a real git history and patches with known gold.

Commit A is the base of instance ``acme__calc-1`` (B fixes ``divide``);
commit B is the base of ``acme__calc-2`` (C inserts a line into
``Stats.mean``, changes a module-level and a class-level line, adds a file).

``SHAPES_RS`` and ``SHAPES_NODES``: a Rust file and the nodes a parser of
another language gives for it, for gold and BM25 documents without that parser.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import GIT_ENV, write_files

from ctx04_core.types import Node, Span

REPO = "acme/calc"
CTX04 = str(Path(sys.executable).parent / "ctx04")
TIMINGS = ("seconds", "index_seconds", "tree_seconds")  # what differs between equal runs

OPS_A = '''"""Arithmetic helpers."""
import math

PRECISION = 2


def add(a, b):
    return a + b


def divide(a, b):
    """Divide a by b."""
    return round(a / b, PRECISION)


class Stats:
    """Running statistics."""

    scale = 1

    def mean(self, values):
        total = sum(values)
        return total / len(values)

    def spread(self, values):
        return (max(values) - min(values)) * self.scale


def hypot(a, b):
    return math.sqrt(a * a + b * b)
'''
# B: divide() returns 0.0 for a zero divisor: two lines inserted after line 12.
OPS_B = OPS_A.replace(
    "    return round(a / b, PRECISION)\n",
    "    if b == 0:\n        return 0.0\n    return round(a / b, PRECISION)\n",
)
# C (against B): a module-level change (line 4), a class-level one (21) and a pure
# insertion after line 24, in Stats.mean.
OPS_C = OPS_B.replace("PRECISION = 2\n", "PRECISION = 4\n").replace(
    "    scale = 1\n", "    scale = 10\n"
).replace(
    "        total = sum(values)\n",
    "        total = sum(values)\n        if not values:\n            return 0.0\n",
)
FMT = '''"""Formatting numbers for display."""


def percent(value):
    return f"{value * 100:.1f}%"


def money(value, currency="EUR"):
    return f"{value:.2f} {currency}"
'''
FILES_A: dict[str, str | bytes] = {
    "calc/__init__.py": '"""A calculator."""\n',
    "calc/ops.py": OPS_A,
    "calc/fmt.py": FMT,
    "README.md": "# calc\n\nArithmetic for the tests.\n",
}
TASK_1 = (
    "divide() crashes with ZeroDivisionError when b is 0\n\n"
    "Calling calc.ops.divide(1, 0) raises ZeroDivisionError; it should return 0.0 instead."
)
TASK_2 = (
    "Stats.mean fails on an empty list, and the precision is too low\n\n"
    "Stats.mean([]) raises ZeroDivisionError: division by zero. Also PRECISION should be 4 "
    "and the Stats scale should be 10."
)


@dataclass(frozen=True)
class Bench:
    repo: Path  # the work tree; its .git is the mapped git directory
    commits: dict[str, str]  # A, B, C
    dataset: Path
    repos: Path  # the repo map JSON


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def build(tmp: Path) -> Bench:
    root = tmp / "calc"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write_files(root, FILES_A)
    commits = {"A": commit_all(root, "A")}
    write_files(root, {"calc/ops.py": OPS_B})
    commits["B"] = commit_all(root, "B: divide by zero")
    write_files(root, {"calc/ops.py": OPS_C, "calc/new.py": "def fresh():\n    return 1\n"})
    commits["C"] = commit_all(root, "C: empty mean, precision, scale")
    instances = [
        ("acme__calc-1", commits["A"], commits["B"], TASK_1),
        ("acme__calc-2", commits["B"], commits["C"], TASK_2),
    ]
    dataset = tmp / "dataset.jsonl"
    dataset.write_text("".join(
        json.dumps({
            "instance_id": iid, "repo": REPO, "base_commit": base,
            "problem_statement": task, "patch": git(root, "diff", base, fix),
        }) + "\n"
        for iid, base, fix, task in instances
    ))
    repos = tmp / "repos.json"
    repos.write_text(json.dumps({REPO: str(root / ".git")}))
    return Bench(root, commits, dataset, repos)


# A Rust file as a tree-sitter parser plugin reports it: kinds beyond Python's,
# and no module node.
SHAPES_RS = """use std::fmt;

pub struct Point {
    x: i32,
}

impl Point {
    pub fn norm(&self) -> i32 {
        self.x.abs()
    }

    const ORIGIN: i32 = 0;
}

pub trait Shape {
    fn area(&self) -> f64;
}
"""


def node(qualname: str, kind: str, start: int, end: int, path: str = "src/shapes.rs") -> Node:
    return Node(qualname, qualname.rsplit(".", 1)[-1], kind, Span(path, start, end), start, "", "")


SHAPES_NODES = (
    node("shapes.Point", "struct", 3, 5),
    node("shapes.Point", "impl", 7, 13),
    node("shapes.Point.norm", "method", 8, 10),
    node("shapes.Shape", "trait", 15, 17),
    node("shapes.Shape.area", "method", 16, 16),
)


# A second repository for runs of several instances over several repositories
# (issue 15's executors): each fix is the next commit, so each instance has
# its own base commit and tree.
SHOP_REPO = "acme/shop"
SHOP_FIXES = [
    ("acme__shop-1", "shop/cart.py",
     "    def remove(self, sku: str) -> None:\n",
     "    def remove(self, sku: str) -> None:\n"
     "        \"\"\"Drop the sku and give its units back.\"\"\"\n",
     "Cart.remove does not give the stock back\n\nAfter Cart.remove(sku) the inventory "
     "still counts the reserved units of that sku."),
    ("acme__shop-2", "shop/pricing.py",
     "    rate = COUPONS.get(code, 0.0)\n",
     "    rate = COUPONS[code]\n",
     "apply_discount ignores an unknown coupon code\n\nA typo in the coupon code passed to "
     "apply_discount silently gives no discount; it should raise KeyError."),
    ("acme__shop-3", "shop/shipping.py",
     "    return 4.5 + 1.2 * weight_kg\n",
     "    return round(4.5 + 1.2 * weight_kg, 2)\n",
     "shipping_cost returns amounts with many decimals\n\nshipping_cost(10, 0.3) gives "
     "4.859999999 instead of 4.86."),
]


def build_fleet(tmp: Path) -> Bench:
    """The two calc instances and three over a second repository, ``acme/shop``: five."""
    from conftest import SHOP

    calc = build(tmp)
    root = tmp / "shop"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_files(root, SHOP)
    base = commit_all(root, "shop")
    lines = [calc.dataset.read_text()]
    for iid, path, old, new, task in SHOP_FIXES:
        text = (root / path).read_text()
        assert old in text, (path, old)
        write_files(root, {path: text.replace(old, new)})
        fix = commit_all(root, iid)
        lines.append(json.dumps({
            "instance_id": iid, "repo": SHOP_REPO, "base_commit": base,
            "problem_statement": task, "patch": git(root, "diff", base, fix),
        }) + "\n")
        base = fix
    dataset = tmp / "fleet.jsonl"
    dataset.write_text("".join(lines))
    repos = tmp / "fleet-repos.json"
    repos.write_text(json.dumps({REPO: str(calc.repo / ".git"), SHOP_REPO: str(root / ".git")}))
    return Bench(calc.repo, calc.commits, dataset, repos)


def cli_env(tmp: Path) -> dict[str, str]:
    """The environment of the CLI runs a module-scoped fixture makes: the per-test
    cache isolation has not run yet there, so the caches go under ``tmp`` here
    and the weighted fusion is asked for here (conftest's ``_isolated_cache``)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "xdg"), "COLUMNS": "200",
           "CTX04_FUSION": "weighted"}
    env.pop("CTX04_DISABLE", None)
    return env


def ctx04(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTX04, *map(str, args)], capture_output=True, text=True, check=False, env=env,
        timeout=300,
    )


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def untimed(path: Path) -> list[dict[str, Any]]:
    """The records of a run without their timings."""
    return [{k: v for k, v in r.items() if k not in TIMINGS} for r in records(path)]
