"""``ctx04 eval``, ``eval --compare``, ``ab`` and ``ablate`` as a user runs them.

The tiny dataset (tests/bench_fixture.py) has two instances over one temp
git repository; each number below was checked by hand against the records'
gold and shown lines.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from bench_fixture import Bench, build, cli_env, ctx04, records

from ctx04_core.bench.metrics import METRICS


@dataclass(frozen=True)
class Runs:
    bench: Bench
    tmp: Path
    env: dict[str, str]
    ctx04: subprocess.CompletedProcess[str]
    bm25: subprocess.CompletedProcess[str]


def dataset_args(bench: Bench, tmp: Path) -> tuple[str | Path, ...]:
    """The tiny dataset, its repositories and the module's tree cache, as eval takes them."""
    return ("--dataset", bench.dataset, "--repos", bench.repos, "--cache-dir", tmp / "trees")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("bench")
    bench = build(tmp)
    env = cli_env(tmp)
    common = dataset_args(bench, tmp)
    return Runs(
        bench, tmp, env,
        ctx04(env, "eval", *common, "--out", tmp / "ctx04.jsonl"),
        ctx04(env, "eval", *common, "--system", "bm25", "--out", tmp / "bm25.jsonl"),
    )


def table(stdout: str) -> dict[str, list[str]]:
    """The rows of a Rich table: first cell -> the other cells."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


def metrics(**values: float) -> dict[str, float]:
    return {m: values.get(m.replace("@", "_at_"), 1.0) for m in METRICS}


def test_eval_ctx04(runs: Runs) -> None:
    assert runs.ctx04.returncode == 0, runs.ctx04.stderr
    first, second = records(runs.tmp / "ctx04.jsonl")
    assert first["gold"] == {
        "files": ["calc/ops.py"], "lines": {"calc/ops.py": [12]},
        "symbols": [{"path": "calc/ops.py", "qualname": "calc.ops.divide", "kind": "function",
                     "region": [[11, 13]]}],
    }
    assert [s["qualname"] for s in second["gold"]["symbols"]] == [
        "calc.ops", "calc.ops.Stats", "calc.ops.Stats.mean"
    ]
    assert (first["system"], first["disabled"], first["error"]) == ("ctx04", [], None)
    assert first["unavailable"] == second["unavailable"] == []
    assert first["settings"]["budget_tokens"] == 4000
    # The title's "b" weighs x3, and hypot holds it twice: it ranks second.
    assert [r["qualname"] for r in first["ranked"]] == [
        "calc.ops.divide", "calc.ops.hypot", "calc.ops.add", "calc.fmt.percent", "calc.ops.Stats",
        "calc.ops.Stats.mean", "calc.ops.Stats.spread", "calc.fmt.money",
    ]
    # divide (rank 1) is shown whole, with three lines either side (the first
    # candidate's runs, first_run_context) that no other excerpt shows; every
    # other candidate's best line scores under a fifth of divide's best:
    # hypot and add, leaders (ranks 2 and 3), would be their signatures, the
    # rest not at all. Both are two lines long (at most short_function_lines):
    # whole, add with the blank lines after it. Last, the leading file's one
    # import and the blank line after it (a head, ranked past the ranking: no
    # rank).
    assert first["shown"] == [
        {"path": "calc/ops.py", "rank": 1, "extra": None, "lines": [[11, 16]]},
        {"path": "calc/ops.py", "rank": 2, "extra": None, "lines": [[29, 30]]},
        {"path": "calc/ops.py", "rank": 3, "extra": None, "lines": [[7, 10]]},
        {"path": "calc/ops.py", "rank": None, "extra": "head", "lines": [[2, 3]]},
    ]
    # Of its 14 lines, two (hypot's) are irrelevant.
    assert first["metrics"] == metrics(irrelevant_context_ratio=2 / 14, tokens=216.0)
    # The module holding the gold line PRECISION = 2 ranks fourth: two of the
    # three symbols are in the top 3, one of them at rank 1.
    assert [r["qualname"] for r in second["ranked"]] == [
        "calc.ops.Stats", "calc.ops.Stats.mean", "calc.ops.divide", "calc.ops",
        "calc.ops.Stats.spread",
    ]
    # Rank 1 is a class of 11 lines (at most type_span_max_lines): its whole
    # span, methods too (18-28), and three lines either side of it (15-17,
    # 29-31); Stats.mean, inside it, keeps its signature
    # (23) rather than a second copy of its body; the module shows its best
    # line (PRECISION = 2) with two lines either side, a leader (rank 4 of
    # leader_ranks 5) cut to its best lines; divide, a leader under the floor,
    # would be its signature: three lines long, it is whole, with the blank
    # lines after it (14-15, before Stats's context); spread, past the
    # leaders, scores under the floor.
    assert second["shown"] == [
        {"path": "calc/ops.py", "rank": 1, "extra": None, "lines": [[16, 31]]},
        {"path": "calc/ops.py", "rank": 2, "extra": None, "lines": [[23, 23]]},
        {"path": "calc/ops.py", "rank": 3, "extra": None, "lines": [[11, 15]]},
        {"path": "calc/ops.py", "rank": 4, "extra": None, "lines": [[2, 6]]},
    ]
    # Gold lines 4, 21 and 24: the slice shows all three; Stats (18-28) holds
    # 21 and 24, the module (rank 4) all three.
    assert second["metrics"] == metrics(
        recall_at_1=1 / 3, recall_at_3=2 / 3, line_recall=1.0, line_recall_at_1=2 / 3,
        line_recall_at_3=2 / 3, irrelevant_context_ratio=0.0, tokens=282.0,
    )
    assert "ctx04 eval: ctx04: 2 instances, 0 errored" in runs.ctx04.stdout
    rows = table(runs.ctx04.stdout)
    assert {m: rows[m] for m in METRICS} == {
        "file_acc@1": ["1.000"], "file_acc@5": ["1.000"], "file_acc@10": ["1.000"],
        "function_acc@5": ["1.000"], "function_acc@10": ["1.000"],
        "function_acc_read@5": ["1.000"], "function_acc_read@10": ["1.000"], "recall@1": ["0.667"],
        "recall@3": ["0.833"], "recall@5": ["1.000"], "mrr": ["1.000"],
        "required_file_recall": ["1.000"], "required_symbol_recall": ["1.000"],
        "line_recall": ["1.000"], "line_recall@1": ["0.833"], "line_recall@3": ["0.833"],
        "line_recall@5": ["1.000"], "irrelevant_context_ratio": ["0.071"], "tokens": ["249.0"],
    }
    for timing in ("seconds_p50", "seconds_p95", "index_seconds_median", "index_seconds_total"):
        assert re.fullmatch(r"\d+\.\d\d", rows[timing][0])


def learned(runs: Runs) -> Path:
    """The records of a run ranked by the learned order (written once)."""
    out = runs.tmp / "learned.jsonl"
    if not out.exists():
        run = ctx04(runs.env, "eval", *dataset_args(runs.bench, runs.tmp),
                    "--set", "fusion=learned", "--out", out)
        assert run.returncode == 0, run.stderr
    return out


def test_eval_records_the_learned_orders_model_score(runs: Runs) -> None:
    first, _ = records(learned(runs))
    # The shipped model's log-odds, best first: divide, which holds the gold
    # line, the only candidate more likely than not to hold one.
    assert [(r["qualname"], r["model_score"]) for r in first["ranked"]] == [
        ("calc.ops.divide", 1.631266), ("calc.ops.hypot", -1.712191),
        ("calc.ops.add", -1.844938), ("calc.ops.Stats.mean", -2.331988),
        ("calc.ops.Stats.spread", -2.531521), ("calc.ops.Stats", -2.541108),
        ("calc.fmt.percent", -3.197539), ("calc.fmt.money", -4.100515),
    ]
    # Beside it, the model's own probability, which the slice's doubt gate
    # reads: divide's is 1 / (1 + e^0.368734), its score less the 2.0 the
    # third-party pin plugin's signal adds to it (tests/plugins/ctx04_pin).
    assert [r["probability"] for r in first["ranked"]][:2] == [0.408847, 0.100123]
    # The weighted fusion's records carry none.
    assert {r["model_score"] for r in records(runs.tmp / "ctx04.jsonl")[0]["ranked"]} == {None}
    assert {r["probability"] for r in records(runs.tmp / "ctx04.jsonl")[0]["ranked"]} == {None}



def test_compare_splits_line_recall_by_the_doubt_gate(runs: Runs) -> None:
    before = learned(runs)
    first, second = records(before)
    # Both leaders clear the gate (0.35): neither slice is in doubt, and the
    # first shows its gold line.
    assert first["metrics"]["line_recall"] == 1.0
    assert [max(r["probability"] for r in x["ranked"]) for x in (first, second)] == [
        0.408847, 0.632397
    ]
    # A run in which the first task's leaders all fell under the gate and its
    # slice lost the line, and the second task's slice lost half its lines.
    dropped = first | {
        "ranked": [r | {"probability": 0.2} for r in first["ranked"]],
        "metrics": first["metrics"] | {"line_recall": 0.0},
    }
    halved = second | {"metrics": second["metrics"] | {
        "line_recall": second["metrics"]["line_recall"] - 0.5
    }}
    after = runs.tmp / "doubt-b.jsonl"
    after.write_text(json.dumps(dropped) + "\n" + json.dumps(halved) + "\n")
    done = ctx04(runs.env, "eval", "--compare", before, after)
    assert done.returncode == 0, done.stderr
    assert ("line_recall Δ by the slice's doubt gate: -0.250 from the 1 instances whose slice "
            "it decided alike, -0.500 from the 1 that crossed it (1 into doubt, 0 out)"
            ) in " ".join(done.stdout.split())
    # Records without the field (older runs) give no split.
    old = runs.tmp / "doubt-old.jsonl"
    old.write_text("".join(
        json.dumps(r | {"ranked": [{k: v for k, v in c.items() if k != "probability"}
                                   for c in r["ranked"]]}) + "\n"
        for r in (first, second)
    ))
    assert "doubt gate" not in ctx04(runs.env, "eval", "--compare", old, after).stdout


def test_eval_records_what_the_retrieval_reported_unavailable(runs: Runs) -> None:
    model = runs.tmp / "corrupt-model.json"
    model.write_text("{not json", encoding="utf-8")
    out = runs.tmp / "corrupt-model.jsonl"
    run = ctx04(runs.env, "eval", *dataset_args(runs.bench, runs.tmp), "--set", "fusion=learned",
                "--set", f"ranking_model={model}", "--out", out)
    assert run.returncode == 0, run.stderr
    why = (f"ranking model {model}: not valid JSON (Expecting property name enclosed in "
           "double quotes at line 1 column 2)")
    # Each record says what its retrieval could not do (here: read the model,
    # so the weighted order ranked), and the summary counts the instances.
    for record in records(out):
        assert record["unavailable"] == [{"reason": "ranking model", "detail": why}]
        assert {r["model_score"] for r in record["ranked"]} == {None}
    assert ("unavailable in retrieval, instances by reason: ranking model 2 "
            "(each record's `unavailable` says what)") in run.stdout
    assert "unavailable in retrieval" not in runs.ctx04.stdout


def test_eval_gives_each_tree_its_history_up_to_the_base(runs: Runs) -> None:
    first, second = records(runs.tmp / "ctx04.jsonl")
    # acme__calc-1's base is A: the fix B ("B: divide by zero") is later and
    # unseen, so no commit message shares a word with the task.
    assert {r["signals"]["history"] for r in first["ranked"]} == {0.0}
    # acme__calc-2's base is B: B's message shares "zero" with the task and B
    # changed calc/ops.py alone; C, the fix, is later and unseen.
    assert {(r["path"], r["signals"]["history"]) for r in second["ranked"]} == {
        ("calc/ops.py", 1.0)
    }


def test_eval_bm25(runs: Runs) -> None:
    assert runs.bm25.returncode == 0, runs.bm25.stderr
    first, second = records(runs.tmp / "bm25.jsonl")
    assert (first["system"], first["settings"]["top_k"], first["error"]) == ("bm25", 20, None)
    # Every function shares the query's "return"; fmt.py's 4 lines are not in the gold file.
    assert [r["qualname"] for r in first["ranked"]] == [
        "calc.ops.divide", "calc.ops.add", "calc.ops.hypot", "calc.fmt.percent",
        "calc.fmt.money", "calc.ops.Stats.mean", "calc.ops.Stats.spread",
    ]
    assert first["metrics"] == metrics(irrelevant_context_ratio=6 / 16, tokens=355.0)
    assert [r["qualname"] for r in second["ranked"]] == [
        "calc.ops.Stats", "calc.ops", "calc.ops.Stats.mean", "calc.ops.divide",
        "calc.ops.Stats.spread",
    ]
    # Stats (18-28) holds gold lines 21 and 24 of 4, 21, 24; the module, all three.
    assert second["metrics"] == metrics(recall_at_1=1 / 3, line_recall_at_1=2 / 3,
                                        irrelevant_context_ratio=0.0, tokens=290.0)
    rows = table(runs.bm25.stdout)
    assert (rows["recall@1"], rows["irrelevant_context_ratio"], rows["tokens"]) == (
        ["0.667"], ["0.188"], ["322.5"]
    )


def test_gaps(runs: Runs) -> None:
    done = ctx04(runs.env, "gaps", runs.tmp / "ctx04.jsonl")
    assert done.returncode == 0, done.stderr
    rows = table(done.stdout)
    # The slices show every gold line (line recall 1.0): nothing is elsewhere.
    assert rows["all"] == ["2", "1.000", *["0.000"] * 7]
    # Lines a rank shows, per instance (the records' shown lines above): rank
    # 1 shows 6 and 16 lines (divide and Stats, each with the lines either
    # side that ranks 2-3 do not show), ranks 2-3 six (short functions whole,
    # leaders under the prune's relative floor; two of the twelve, hypot's,
    # irrelevant), rank 4 five. Gold line 12 (first instance) is rank 1's; of
    # 21, 24 and 4 (second), rank 1 shows two, rank 4 one.
    assert (rows["1"], rows["2-3"], rows["4-5"], rows["6-10"], rows["no candidate"]) == (
        ["11.0", "0.000", "0.833"], ["6.0", "0.167", "0.000"], ["2.5", "0.000", "0.167"],
        ["0.0", "-", "0.000"], ["0.0", "-", "0.000"],
    )


def test_gaps_bad_records_exit_2(runs: Runs, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x"}\n')
    done = ctx04(runs.env, "gaps", bad)
    assert done.returncode == 2
    assert f"{bad}:1: not a ctx04 eval record" in done.stderr
    # A record eval could read back, without the shown lines gaps counts.
    first = records(runs.tmp / "ctx04.jsonl")[0]
    del first["shown"]
    bad.write_text(json.dumps(first) + "\n")
    done = ctx04(runs.env, "gaps", bad)
    assert done.returncode == 2
    assert f"{bad}: a record lacks the gold, ranked or shown lines ctx04 gaps reads " \
        "(KeyError: 'shown')" in done.stderr


def test_compare(runs: Runs) -> None:
    done = ctx04(runs.env, "eval", "--compare", runs.tmp / "ctx04.jsonl", runs.tmp / "bm25.jsonl")
    assert done.returncode == 0, done.stderr
    assert "2 instances in both (only in A: 0, only in B: 0)" in done.stdout
    rows = table(done.stdout)
    assert rows["function_acc@5"] == [
        "1.000", "1.000", "+0.000", "+0.000 .. +0.000", "0 / 0", "1.00"
    ]
    assert rows["recall@1"] == ["0.667", "0.667", "+0.000", "+0.000 .. +0.000", "0 / 0", "1.00"]
    # bm25's slice is longer than ctx04's on both instances (249.0 -> 322.5 on average).
    assert [r["tokens"] for r in records(runs.tmp / "ctx04.jsonl")] == [216, 282]
    assert [r["tokens"] for r in records(runs.tmp / "bm25.jsonl")] == [355, 290]
    # Changes +139 and +8: mean 73.5, standard error 65.5, so 73.5 ± 1.96 x 65.5;
    # two instances up and none down is a sign test p of 2 x 1/4.
    assert rows["tokens"] == ["249.0", "322.5", "+73.5", "-54.9 .. +201.9", "2 / 0", "0.50"]
    assert rows["seconds_p50"][-1] == "-"


def test_eval_records_failures_and_goes_on(runs: Runs) -> None:
    lines = runs.bench.dataset.read_text().splitlines()
    bad_commit = json.loads(lines[0]) | {"instance_id": "acme__calc-9", "base_commit": "0" * 40}
    unmapped = json.loads(lines[1]) | {"instance_id": "other__x-1", "repo": "other/x"}
    dataset = runs.tmp / "with-failures.jsonl"
    dataset.write_text("\n".join([lines[0], json.dumps(bad_commit), json.dumps(unmapped)]) + "\n")
    ids = runs.tmp / "ids.txt"
    ids.write_text("acme__calc-9\nacme__calc-1\nother__x-1\n")
    out = runs.tmp / "failures.jsonl"
    done = ctx04(runs.env, "eval", "--dataset", dataset, "--repos", runs.bench.repos,
                 "--cache-dir", runs.tmp / "trees", "--ids", ids, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "3 instances, 2 errored" in done.stdout
    found = records(out)
    assert [r["instance_id"] for r in found] == ["acme__calc-1", "acme__calc-9", "other__x-1"]
    assert found[1]["error"].startswith("tree: TreeError: git ls-tree")
    assert found[2]["error"] == "tree: LookupError: other/x is not in the repo map"
    assert found[2]["metrics"] == metrics(**{m.replace("@", "_at_"): 0.0 for m in METRICS}) | {
        "irrelevant_context_ratio": 1.0
    }
    assert table(done.stdout)["recall@1"] == ["0.333"]


def test_eval_bad_input_exits_2(runs: Runs, tmp_path: Path) -> None:
    done = ctx04(runs.env, "eval", "--dataset", runs.bench.dataset, "--repos", runs.bench.repos)
    assert done.returncode == 2 and "needs --dataset, --repos and --out" in done.stderr
    done = ctx04(runs.env, "eval", "--dataset", runs.bench.dataset, "--repos", runs.bench.repos,
                 "--disable", "nosuch", "--out", tmp_path / "x.jsonl")
    assert done.returncode == 2 and "no installed plugin named 'nosuch'" in done.stderr
    done = ctx04(runs.env, "eval", "--dataset", runs.bench.dataset, "--repos", runs.bench.repos,
                 "--system", "bm25", "--disable", "prune", "--out", tmp_path / "x.jsonl")
    assert done.returncode == 2 and "the bm25 baseline has none" in done.stderr
    missing = tmp_path / "nope.jsonl"
    done = ctx04(runs.env, "eval", "--compare", missing, missing)
    assert done.returncode == 2 and "cannot read" in done.stderr
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"instance_id": "caf\xe9"}\n')
    done = ctx04(runs.env, "ab", "--current", latin1, "--candidate", latin1)
    assert done.returncode == 2 and f"{latin1}: not UTF-8 (" in done.stderr


def ab_record(iid: str, **values: float) -> str:
    base = {"recall@1": 0.5, "recall@3": 0.5, "recall@5": 0.5, "mrr": 0.5,
            "required_file_recall": 0.5, "required_symbol_recall": 0.5,
            "irrelevant_context_ratio": 0.8, "tokens": 3000.0}
    all_metrics = {m: 0.0 for m in METRICS} | base | values
    return json.dumps({"instance_id": iid, "metrics": all_metrics, "seconds": 1.0,
                       "index_seconds": None, "error": None})


def test_ab_win_and_lose(tmp_path: Path, runs: Runs) -> None:
    current = tmp_path / "current.jsonl"
    current.write_text(ab_record("a") + "\n" + ab_record("b") + "\n")
    better = tmp_path / "better.jsonl"
    better.write_text(ab_record("a", mrr=1.0) + "\n" + ab_record("b") + "\n"
                      + ab_record("c", mrr=0.0) + "\n")
    done = ctx04(runs.env, "ab", "--current", current, "--candidate", better)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "over 2 instances in both (only current: 0, only candidate: 1)" in done.stdout
    rows = table(done.stdout)
    assert rows["mrr"] == ["0.500", "0.750", "+0.250", "must not fall; one must rise", "improves"]
    assert rows["tokens"][-1] == "does not rise"
    assert rows["resolve_rate"] == ["-", "-", "-", "must not fall", "not measured"]
    # The end-to-end half was not run: the verdict says so (tests/test_e2e.py runs it).
    assert ("win on retrieval only: mrr improve(s); nothing regresses or rises; the end-to-end "
            "half was not run") in " ".join(done.stdout.split())

    noisier = tmp_path / "noisier.jsonl"
    noisier.write_text(ab_record("a", mrr=1.0, tokens=3100.0) + "\n" + ab_record("b") + "\n")
    done = ctx04(runs.env, "ab", "--current", current, "--candidate", noisier)
    assert done.returncode == 1
    assert table(done.stdout)["tokens"][-1] == "rises"
    assert "lose: tokens rises" in done.stdout


def test_ablate(runs: Runs) -> None:
    out = runs.tmp / "ablation"
    done = ctx04(runs.env, "ablate", "--dataset", runs.bench.dataset, "--repos", runs.bench.repos,
                 "--cache-dir", runs.tmp / "trees", "--out-dir", out)
    assert done.returncode == 0, done.stderr
    names = ["ripgrep", "apidesc", "callgraph", "bm25", "traceback", "rerank", "prune"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["full.jsonl", *(f"no-{n}.jsonl" for n in names)]
    )
    assert records(out / "full.jsonl")[0]["metrics"] == records(runs.tmp / "ctx04.jsonl")[0][
        "metrics"
    ]
    assert records(out / "no-callgraph.jsonl")[0]["disabled"] == ["callgraph"]
    verdicts = dict(
        re.findall(r"^(\w+): (keep|delete) \(", done.stdout, flags=re.MULTILINE)
    )
    assert list(verdicts) == names
    rows = table(done.stdout)
    assert rows["verdict"] == ["", *verdicts.values()]
    # Without prune, whole spans are shown: the slice grows.
    assert verdicts["prune"] == "keep" and rows["tokens"][-1].startswith("+")


def labelled(runs: Runs) -> Path:
    """The two instances labelled Python, and an unmapped one labelled Go (it fails)."""
    first, second = (json.loads(line) for line in runs.bench.dataset.read_text().splitlines())
    go = second | {"instance_id": "other__x-1", "repo": "other/x"}
    dataset = runs.tmp / "labelled.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in [
        first | {"language": "Python"}, second | {"language": "Python"}, go | {"language": "Go"},
    ]))
    return dataset


def test_eval_per_language(runs: Runs) -> None:
    # Without languages in the dataset: no per-language table, records say None.
    assert "per language" not in runs.ctx04.stdout + runs.bm25.stdout
    assert {r["language"] for r in records(runs.tmp / "ctx04.jsonl")} == {None}
    dataset = labelled(runs)
    common = ("--dataset", dataset, "--repos", runs.bench.repos, "--cache-dir", runs.tmp / "trees")
    outs = {}
    for system in ("ctx04", "bm25"):
        outs[system] = runs.tmp / f"labelled-{system}.jsonl"
        done = ctx04(runs.env, "eval", *common, "--system", system, "--out", outs[system])
        assert done.returncode == 0, done.stderr
        assert "3 instances, 1 errored" in done.stdout
        assert [r["language"] for r in records(outs[system])] == ["Python", "Python", "Go"]
        rows = table(done.stdout)
        assert rows["language"] == [
            "n", "file@1", "file@5", "file@10", "fn@5", "fn@10", "fnr@5", "fnr@10", "r@1", "r@3",
            "r@5", "MRR", "file rec", "sym rec", "lines", "lines@1", "lines@3", "lines@5",
            "irrel", "tokens",
        ]
        # Go: the failed instance only, scored as an empty retrieval.
        assert rows["Go"] == ["1", *(["0.000"] * 17), "1.000", "0.0"]
        # Python: the two instances as test_eval_ctx04 and test_eval_bm25 score them.
        python = dict(zip(METRICS, rows["Python"][1:], strict=True))
        assert rows["Python"][0] == "2"
        assert (python["recall@1"], python["recall@3"], python["tokens"]) == {
            "ctx04": ("0.667", "0.833", "249.0"), "bm25": ("0.667", "1.000", "322.5")
        }[system]
        # The whole run's summary mixes both.
        assert table(done.stdout)["recall@1"] == ["0.444"]
    done = ctx04(runs.env, "eval", "--compare", outs["ctx04"], outs["bm25"])
    assert done.returncode == 0, done.stderr
    assert "per language, Δ (B − A):" in done.stdout
    rows = table(done.stdout)
    assert rows["Go"] == ["1", *(["+0.000"] * 18), "+0.0"]
    python = dict(zip(METRICS, rows["Python"][1:], strict=True))
    assert (python["recall@3"], python["tokens"]) == ("+0.167", "+73.5")
    # Unlabelled records give no per-language table.
    done = ctx04(runs.env, "eval", "--compare", runs.tmp / "ctx04.jsonl", runs.tmp / "bm25.jsonl")
    assert "per language" not in done.stdout
