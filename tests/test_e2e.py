"""``ctx04 e2e run`` and ``ctx04 e2e report``, and ``ctx04 ab``'s end-to-end guards.

Everything runs as a user runs it: the CLI in a subprocess, the real git
repositories of tests/bench_fixture.py, the stand-in model (a real HTTP
server on 127.0.0.1, tests/model_server.py) answering from a script
(tests/e2e_answers.py), and SWE-bench harness reports in the harness's own
format (``make_run_report``, schema_version 2).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bench_fixture import OPS_A, OPS_B, build, cli_env, commit_all, ctx04, git, records
from conftest import write_files
from e2e_answers import DIVIDE_BLOCKS, DIVIDE_DIFF, GUESSED, MEAN_BLOCKS
from model_server import COMPLETION_TOKENS, PROMPT_TOKENS, Reply, StandIn
from test_bench_cli import ab_record, table

PRICES = ("--set", "model_usd_per_mtok_input=2.5", "--set", "model_usd_per_mtok_output=10")
CALL_COST = (PROMPT_TOKENS * 2.5 + COMPLETION_TOKENS * 10) / 1_000_000  # 0.0012525
CALL_TOKENS = PROMPT_TOKENS + COMPLETION_TOKENS  # 366

# The predictions files of the three arms, byte for byte: a patch where the
# answer gave one that applies and passed the gate, "" where it did not.
RETRIEVED = (
    r'{"instance_id": "acme__calc-1", "model_name_or_path": "m-1+ctx04-retrieved", '
    r'"model_patch": "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n'
    r'+++ b/calc/ops.py\n@@ -10,6 +10,8 @@\n \n def divide(a, b):\n     \"\"\"Divide a by b.'
    r'\"\"\"\n+    if b == 0:\n+        return 0.0\n     return round(a / b, PRECISION)\n \n \n"}'
    "\n"
    r'{"instance_id": "acme__calc-2", "model_name_or_path": "m-1+ctx04-retrieved", '
    r'"model_patch": ""}'
    "\n"
)
ORACLE = (
    r'{"instance_id": "acme__calc-1", "model_name_or_path": "m-1+ctx04-oracle", '
    r'"model_patch": "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n'
    r'+++ b/calc/ops.py\n@@ -10,6 +10,8 @@\n \n def divide(a, b):\n     \"\"\"Divide a by b.'
    r'\"\"\"\n+    if not b:\n+        return 0.0\n     return round(a / b, PRECISION)\n \n \n"}'
    "\n"
    r'{"instance_id": "acme__calc-2", "model_name_or_path": "m-1+ctx04-oracle", '
    r'"model_patch": ""}'
    "\n"
)
NONE = (
    r'{"instance_id": "acme__calc-1", "model_name_or_path": "m-1+ctx04-none", '
    r'"model_patch": ""}'
    "\n"
    r'{"instance_id": "acme__calc-2", "model_name_or_path": "m-1+ctx04-none", '
    r'"model_patch": "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n'
    r'+++ b/calc/ops.py\n@@ -1,7 +1,7 @@\n \"\"\"Arithmetic helpers.\"\"\"\n import math\n \n'
    r'-PRECISION = 2\n+PRECISION = 4\n \n \n def add(a, b):\n@@ -21,6 +21,8 @@\n     scale = 1\n'
    r' \n     def mean(self, values):\n+        if not values:\n+            return 0.0\n'
    r'         total = sum(values)\n         return total / len(values)\n \n"}'
    "\n"
)


def run_args(bench_dir: Path, stand_in: StandIn, *more: str | Path) -> list[str | Path]:
    return [
        "e2e", "run", "--dataset", bench_dir / "dataset.jsonl", "--repos",
        bench_dir / "repos.json", "--cache-dir", bench_dir / "trees",
        "--set", f"model_url={stand_in.url}", "--set", "model=m-1", *more,
    ]


def harness_report(model_name: str, submitted: list[str], resolved: list[str]) -> dict[str, Any]:
    """A report as swebench.harness.reporting.make_run_report writes it (schema_version 2):
    every submitted instance ran, the empty patches were not run."""
    return {
        "total_instances": 500, "submitted_instances": len(submitted),
        "completed_instances": len(submitted), "resolved_instances": len(resolved),
        "unresolved_instances": len(submitted) - len(resolved),
        "infra_failure_instances": 0, "ambiguous_failure_instances": 0,
        "empty_patch_instances": 0, "error_instances": 0,
        "completed_ids": sorted(submitted), "incomplete_ids": [], "empty_patch_ids": [],
        "submitted_ids": sorted(submitted), "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(set(submitted) - set(resolved)), "infra_failure_ids": [],
        "ambiguous_failure_ids": [], "failure_reasons": {}, "error_ids": [],
        "schema_version": 2, "model_name_or_path": model_name,
    }


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, indent=4) + "\n")
    return path


def test_three_arms_two_tasks(tmp_path: Path, model: StandIn) -> None:
    bench = build(tmp_path)
    env = cli_env(tmp_path)
    model.reset(
        Reply(DIVIDE_BLOCKS),  # calc-1, retrieved: a search/replace block
        Reply(DIVIDE_DIFF),  # calc-1, oracle: a diff with wrong numbers
        Reply(GUESSED),  # calc-1, none: a SEARCH text that is not in the file
        Reply(status=500),  # calc-2, retrieved: the server fails
        Reply(hang=True),  # calc-2, oracle: no answer within the deadline
        Reply(MEAN_BLOCKS),  # calc-2, none: two blocks in one file
    )
    out = tmp_path / "out"
    done = ctx04(env, *run_args(tmp_path, model, "--arms", "retrieved,oracle,none",
                                "--set", "model_timeout_s=0.5", *PRICES, "--out", out))
    assert done.returncode == 0, done.stderr
    assert (model.unscripted, len(model.requests)) == (0, 6)
    assert sorted(p.name for p in out.iterdir()) == [
        "calls.jsonl", "none.jsonl", "oracle.jsonl", "retrieved.jsonl"
    ]
    assert (out / "retrieved.jsonl").read_text() == RETRIEVED
    assert (out / "oracle.jsonl").read_text() == ORACLE
    assert (out / "none.jsonl").read_text() == NONE

    calls = records(out / "calls.jsonl")
    assert [(c["instance_id"], c["arm"], c["outcome"], c["error"]) for c in calls] == [
        ("acme__calc-1", "retrieved", "patch", None),
        ("acme__calc-1", "oracle", "patch", None),
        ("acme__calc-1", "none", "does_not_apply", None),
        ("acme__calc-2", "retrieved", "model_error", "status"),
        ("acme__calc-2", "oracle", "model_error", "timeout"),
        ("acme__calc-2", "none", "patch", None),
    ]
    assert calls[2]["reason"] == "edit 1 (calc/ops.py): the SEARCH text is not in the file"
    assert calls[3]["reason"] == "status: the model server answered HTTP 500"
    assert calls[4]["reason"] == "timeout: no complete answer within 0.5 s"
    assert calls[4]["seconds"] < 2.0  # the deadline, not the server's 2 s hang
    # Tokens and cost come from the answer's usage and the prices; a failed call has none.
    assert [(c["prompt_tokens"], c["completion_tokens"], c["tokens"], c["cost_usd"])
            for c in calls] == [
        (321, 45, 366, CALL_COST), (321, 45, 366, CALL_COST), (321, 45, 366, CALL_COST),
        (0, 0, 0, 0.0), (0, 0, 0, 0.0), (321, 45, 366, CALL_COST),
    ]
    assert [c["slice_tokens"] for c in calls] == [216, 76, 0, 282, 169, 0]
    assert calls[0]["files"] == ["calc/ops.py"] and calls[0]["model_artifact"] == "stand-in-1"

    # What the model was asked: the issue and the slice, or that none is shown.
    asked = [r.json for r in model.requests]
    assert all(a["model"] == "m-1" and a["temperature"] == 0 for a in asked)
    assert all("response_format" not in a for a in asked)
    assert asked[0]["max_tokens"] == 4096  # e2e's default, not the door's 1024
    user = [a["messages"][1]["content"] for a in asked]
    assert "### calc.ops.divide [calc/ops.py:11-16, sha256:" in user[0]
    # divide with the three lines after it; add, two lines long, is whole
    # with the blank lines after it, in its own excerpt.
    assert "bm25]\ndef add(a, b):\n    return a + b\n\n\n\n### " in user[0]
    assert "### calc.ops.divide [calc/ops.py:11-13, sha256:" in user[1]  # the gold's span
    assert ", oracle]\ndef divide(a, b):" in user[1]
    assert "No code from the repository is shown for this task." in user[2]
    assert "Context slice" not in user[2]
    # The oracle slice of calc-2: the gold symbols' own lines, in gold order.
    headings = [line.split(",")[0] for line in user[4].splitlines() if line.startswith("### ")]
    assert headings == ["### calc.ops [calc/ops.py:1-4", "### calc.ops.Stats [calc/ops.py:18-21",
                        "### calc.ops.Stats.mean [calc/ops.py:23-25"]

    # The retrieved patch, applied by git to the base commit, is the fix's own text.
    work = tmp_path / "apply"
    subprocess.run(["git", "clone", "-q", str(bench.repo), str(work)], check=True)
    git(work, "checkout", "-q", bench.commits["A"])
    (tmp_path / "fix.diff").write_text(json.loads(RETRIEVED.splitlines()[0])["model_patch"])
    git(work, "apply", str(tmp_path / "fix.diff"))
    assert (work / "calc/ops.py").read_text() == OPS_B
    assert OPS_A != OPS_B

    # The harness's verdicts read back: calc-1 resolved with either slice, calc-2 by neither.
    reports = {
        "retrieved": harness_report("m-1+ctx04-retrieved", ["acme__calc-1", "acme__calc-2"],
                                    ["acme__calc-1"]),
        "oracle": harness_report("m-1+ctx04-oracle", ["acme__calc-1", "acme__calc-2"],
                                 ["acme__calc-1"]),
        "none": harness_report("m-1+ctx04-none", ["acme__calc-1", "acme__calc-2"],
                               ["acme__calc-2"]),
    }
    given = [f"--resolved={arm}={write_json(tmp_path / f'{arm}.json', r)}"
             for arm, r in reports.items()]
    done = ctx04(env, "e2e", "report", out, *given)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "e2e-report.json").read_text())
    assert report["partition"] == {
        "retrieval failure": [], "reasoning failure": ["acme__calc-2"],
        "not the bottleneck": ["acme__calc-1"], "curation beats the gold slice": [],
    }
    assert report["excluded"] == []
    assert report["arms"]["retrieved"] == {
        "instances": 2, "resolved": 1, "resolve_rate": 0.5,
        "cost_per_instance": CALL_COST / 2, "tokens_per_instance": CALL_TOKENS / 2,
        "outcomes": {"model_error": 1, "patch": 1},
    }
    assert report["arms"]["none"] == {
        "instances": 2, "resolved": 1, "resolve_rate": 0.5,
        "cost_per_instance": CALL_COST, "tokens_per_instance": float(CALL_TOKENS),
        "outcomes": {"does_not_apply": 1, "patch": 1},
    }
    rows = table(done.stdout)
    assert rows["retrieved"] == ["2", "1", "0.500", "0.000626", "183.0",
                                 "model_error 1, patch 1"]
    assert rows["reasoning failure"] == ["not", "not", "1", "0.500", "acme__calc-2"]
    assert rows["not the bottleneck"] == ["resolved", "resolved", "1", "0.500", "acme__calc-1"]


# A repository whose one function is long enough for the vetting gate's coverage
# rule (at least 40 tokens): a copy of it is a verbatim reproduction.
REPORT_PY = '''"""Plain-text reports."""


def render_report(rows, title):
    """Render rows as a fixed-width text table under an underlined title."""
    width = max(len(str(cell)) for row in rows for cell in row)
    lines = [title.upper(), "=" * len(title)]
    for row in rows:
        lines.append(" | ".join(str(cell).ljust(width) for cell in row))
    return "\\n".join(lines)
'''
REPORT_TASK = (
    "render_report crashes on an empty table\n\n"
    "render_report([], 'Sales') raises ValueError: max() arg is an empty sequence."
)
COPY = (
    "report/copy.py\n<<<<<<< SEARCH\n=======\n"
    + REPORT_PY.split("\n\n\n", 1)[1]
    + ">>>>>>> REPLACE\n"
)
OUTSIDE = "../outside.py\n<<<<<<< SEARCH\n=======\nprint('escaped')\n>>>>>>> REPLACE\n"
THROUGH_GIT = ".git/hooks/post-checkout\n<<<<<<< SEARCH\n=======\n#!/bin/sh\n>>>>>>> REPLACE\n"


def build_report_repo(tmp: Path) -> None:
    """``acme/report`` with four tasks at one base commit (the fix is the next commit)."""
    root = tmp / "report-repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_files(root, {"report/__init__.py": "", "report/render.py": REPORT_PY})
    base = commit_all(root, "base")
    write_files(root, {"report/render.py": REPORT_PY.replace(
        "    width = max(", "    if not rows:\n        return title\n    width = max(")})
    fix = commit_all(root, "fix")
    patch = git(root, "diff", base, fix)
    (tmp / "dataset.jsonl").write_text("".join(
        json.dumps({"instance_id": f"acme__report-{n}", "repo": "acme/report",
                    "base_commit": base, "problem_statement": REPORT_TASK, "patch": patch}) + "\n"
        for n in range(1, 5)
    ))
    (tmp / "repos.json").write_text(json.dumps({"acme/report": str(root / ".git")}))


def test_copies_escapes_and_refusals_are_recorded_never_written(
    tmp_path: Path, model: StandIn
) -> None:
    build_report_repo(tmp_path)
    env = cli_env(tmp_path)
    model.reset(Reply(COPY), Reply(OUTSIDE), Reply(THROUGH_GIT),
                Reply("", refusal="I cannot help with that."))
    out = tmp_path / "out"
    done = ctx04(env, *run_args(tmp_path, model, "--arms", "retrieved", "--out", out))
    assert done.returncode == 0, done.stderr
    calls = records(out / "calls.jsonl")
    assert [(c["outcome"], c["reason"]) for c in calls] == [
        ("rejected", "verbatim reproduction of untrusted retrieved content"),
        ("unsafe_path", "the patch names a path outside the tree: '../outside.py'"),
        ("unsafe_path", "the patch names a path outside the tree: '.git/hooks/post-checkout'"),
        ("refused", "the model refused: I cannot help with that."),
    ]
    # The model was shown the function it copied.
    assert "def render_report(rows, title):" in model.requests[0].json["messages"][1]["content"]
    assert all(json.loads(line)["model_patch"] == ""
               for line in (out / "retrieved.jsonl").read_text().splitlines())
    assert not (tmp_path / "outside.py").exists()
    assert not list(tmp_path.rglob("copy.py"))
    assert not list((tmp_path / "trees").rglob("outside.py"))


def test_run_refuses_bad_input_in_one_line(tmp_path: Path, model: StandIn) -> None:
    build(tmp_path)
    env = cli_env(tmp_path)
    common = ["e2e", "run", "--dataset", tmp_path / "dataset.jsonl", "--repos",
              tmp_path / "repos.json", "--out", tmp_path / "out"]
    done = ctx04(env, *common)
    assert done.returncode == 2
    assert done.stderr.startswith("ctx04: error: no model configured: --set model_url=URL")
    done = ctx04(env, *run_args(tmp_path, model, "--arms", "retrieved,gold",
                                "--out", tmp_path / "out"))
    assert done.returncode == 2
    assert "unknown arm gold; choose from retrieved, oracle, none" in done.stderr
    done = ctx04(env, "e2e", "run", "--dataset", tmp_path / "dataset.jsonl")
    assert done.returncode == 2 and "needs --dataset, --repos and --out" in done.stderr
    assert not (tmp_path / "out").exists()
    assert model.requests == []


def call(iid: str, arm: str, outcome: str = "patch", cost: float = 0.001,
         tokens: int = 1000) -> dict[str, Any]:
    return {"schema": "ctx04.e2e-call.v1", "instance_id": iid, "arm": arm, "outcome": outcome,
            "reason": "", "error": None, "slice_tokens": 100, "model_artifact": "m",
            "prompt_tokens": tokens - 100, "completion_tokens": 100, "tokens": tokens,
            "seconds": 1.0, "cost_usd": cost, "files": []}


def write_run(folder: Path, calls: list[dict[str, Any]]) -> Path:
    folder.mkdir()
    (folder / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    return folder


IDS = ["t1", "t2", "t3", "t4", "t5"]


@pytest.fixture
def two_systems(tmp_path: Path) -> tuple[Path, Path]:
    """The e2e reports of a current and a candidate system over the same five tasks."""
    env = cli_env(tmp_path)
    current = write_run(tmp_path / "current", [
        call(iid, arm, "skipped" if (iid, arm) == ("t5", "oracle") else "patch")
        for iid in IDS for arm in ("retrieved", "oracle")
    ])
    oracle = write_json(tmp_path / "oracle.json", harness_report("m", IDS, ["t1", "t2"]))
    resolved = write_json(tmp_path / "cur.json", harness_report("m", IDS, ["t2", "t4"]))
    done = ctx04(env, "e2e", "report", current, "--resolved", f"retrieved={resolved}",
                 "--resolved", f"oracle={oracle}")
    assert done.returncode == 0, done.stderr
    report = json.loads((current / "e2e-report.json").read_text())
    # t1: oracle only; t2: both; t3: neither; t4: retrieved only; t5: no oracle slice.
    assert report["partition"] == {
        "retrieval failure": ["t1"], "reasoning failure": ["t3"],
        "not the bottleneck": ["t2"], "curation beats the gold slice": ["t4"],
    }
    assert report["excluded"] == ["t5"]
    assert "spec §7.2, the oracle diagnostic over 4 instances (1 excluded" in done.stdout
    assert table(done.stdout)["retrieval failure"] == ["resolved", "not", "1", "0.250", "t1"]

    candidate = write_run(tmp_path / "candidate", [
        call(iid, "retrieved", cost=0.0014, tokens=1400) for iid in IDS
    ])
    resolved = write_json(tmp_path / "cand.json", harness_report("m", IDS, ["t2", "t4"]))
    done = ctx04(env, "e2e", "report", candidate, "--resolved", f"retrieved={resolved}")
    assert done.returncode == 0, done.stderr
    assert "§7.2: needs the harness's reports of both the retrieved and the oracle arm" \
        in done.stdout
    return current / "e2e-report.json", candidate / "e2e-report.json"


def test_report_and_the_ab_decision(tmp_path: Path, two_systems: tuple[Path, Path]) -> None:
    env = cli_env(tmp_path)
    current_e2e, candidate_e2e = two_systems
    current = tmp_path / "current.jsonl"
    current.write_text("".join(ab_record(iid) + "\n" for iid in IDS))
    better = tmp_path / "better.jsonl"
    better.write_text("".join(ab_record(iid, mrr=0.75) + "\n" for iid in IDS))
    e2e = ("--current-e2e", current_e2e, "--candidate-e2e", candidate_e2e)

    # Same resolve rate, cost and tokens at 1.4 × current: the candidate wins outright.
    done = ctx04(env, "ab", "--current", current, "--candidate", better, *e2e)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = table(done.stdout)
    assert rows["resolve_rate"] == ["0.400", "0.400", "+0.000", "must not fall", "holds"]
    assert rows["cost"] == ["0.001", "0.001", "+0.000", "at most 1.5 × current",
                            "within bound"]
    assert rows["e2e_tokens"] == ["1000.0", "1400.0", "+400.0", "at most 1.5 × current",
                                  "within bound"]
    assert "win: mrr improve(s); nothing regresses or rises\n" in done.stdout

    # Without the end-to-end half the verdict says so: never a silent pass.
    done = ctx04(env, "ab", "--current", current, "--candidate", better)
    assert done.returncode == 0
    assert table(done.stdout)["resolve_rate"][-1] == "not measured"
    assert ("win on retrieval only: mrr improve(s); nothing regresses or rises; the "
            "end-to-end half was not run") in " ".join(done.stdout.split())

    # The candidate resolves fewer: it loses, whatever retrieval says.
    worse = write_json(tmp_path / "worse.json", harness_report("m", IDS, ["t2"]))
    done = ctx04(env, "e2e", "report", candidate_e2e.parent, "--resolved", f"retrieved={worse}")
    assert done.returncode == 0, done.stderr
    done = ctx04(env, "ab", "--current", current, "--candidate", better, *e2e)
    assert done.returncode == 1
    assert table(done.stdout)["resolve_rate"] == [
        "0.400", "0.200", "-0.200", "must not fall", "regresses"
    ]
    assert "lose: resolve_rate regresses" in done.stdout

    done = ctx04(env, "ab", "--current", current, "--candidate", better,
                 "--current-e2e", current_e2e)
    assert done.returncode == 2
    assert "--current-e2e and --candidate-e2e go together" in done.stderr


def test_report_refuses_a_report_of_another_run(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    run = write_run(tmp_path / "run", [call("t1", "retrieved"), call("t2", "retrieved")])
    other = write_json(tmp_path / "other.json", harness_report("m", ["t1", "t9"], ["t9"]))
    done = ctx04(env, "e2e", "report", run, "--resolved", f"retrieved={other}")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"ctx04: error: {other}: resolves 1 instance(s) the run's retrieved arm did not "
        "predict: t9"
    )
    partial = write_json(tmp_path / "partial.json", harness_report("m", ["t1"], ["t1"]))
    done = ctx04(env, "e2e", "report", run, "--resolved", f"retrieved={partial}")
    assert done.returncode == 2
    assert "the harness was not given 1 of the retrieved predictions: t2" in done.stderr
    done = ctx04(env, "e2e", "report", run, "--resolved", f"oracle={partial}")
    assert done.returncode == 2 and "the run has no 'oracle' arm (it has retrieved)" in done.stderr
    notes = write_json(tmp_path / "notes.json", {"resolved": 3})
    done = ctx04(env, "e2e", "report", run, "--resolved", f"retrieved={notes}")
    assert done.returncode == 2
    assert "not a SWE-bench harness report (no resolved_ids list)" in done.stderr
    done = ctx04(env, "e2e", "report", run, "--resolved", "retrieved")
    assert done.returncode == 2 and "--resolved takes ARM=REPORT.json" in done.stderr
    done = ctx04(env, "e2e", "report", tmp_path / "nowhere")
    assert done.returncode == 2 and "cannot read" in done.stderr
