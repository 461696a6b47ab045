"""The learned ranking's training side: feature rows, ``ctx04 train`` on real pools."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from bench_fixture import build_fleet, cli_env, ctx04, records

from ctx04_core.ranking.features import FEATURES, feature_rows
from ctx04_core.ranking.model import Calibration, load_model
from ctx04_core.types import Candidate, Span


def test_feature_rows_describe_the_pool() -> None:
    pool = [
        Candidate(Span("pkg/a.py", 1, 40), "class", "pkg.a.A", ("ripgrep",), ("load",), (3,)),
        Candidate(Span("pkg/a.py", 10, 17), "method", "pkg.a.A.load", ("ripgrep", "members"),
                  ("load", "cache"), (12, 14)),
        Candidate(Span("tests/test_a.py", 5, 9), "function", "tests.test_a.test_load",
                  ("bm25",)),
    ]
    rows = feature_rows(
        "A.load ignores the cache\n\nSee pkg/a.py", pool,
        {"bm25": [4.0, 8.0, 2.0], "definition": [1.0, 1.0, 0.0], "custom": [9.0, 9.0, 9.0]},
        [10.0, 20.0, 5.0],
    )
    named = [dict(zip(FEATURES, row, strict=True)) for row in rows]
    assert [r["bm25.value"] for r in named] == [4.0, 8.0, 2.0]
    assert [r["bm25.share"] for r in named] == [0.5, 1.0, 0.25]
    assert [r["bm25.log_rank"] for r in named] == [pytest.approx(1.5849625007211563), 1.0, 2.0]
    # Tied values share the best rank of their tie: 1, 1, then 3.
    assert [r["definition.log_rank"] for r in named] == [1.0, 1.0, 2.0]
    assert [r["history.value"] for r in named] == [0.0, 0.0, 0.0]  # a known signal not given
    assert [r["kind.class"] for r in named] == [1.0, 0.0, 0.0]
    assert [r["kind.method"] for r in named] == [0.0, 1.0, 0.0]
    assert [r["terms"] for r in named] == [1.0, 2.0, 0.0]
    assert [r["terms.share"] for r in named] == [0.5, 1.0, 0.0]
    assert [r["source.members"] for r in named] == [0.0, 1.0, 0.0]
    assert [r["sources"] for r in named] == [1.0, 2.0, 1.0]
    assert [r["test_file"] for r in named] == [0.0, 0.0, 1.0]
    assert [r["inner_candidates"] for r in named] == [1.0, 0.0, 0.0]
    assert [r["has_outer_candidate"] for r in named] == [0.0, 1.0, 0.0]
    assert [r["file.share"] for r in named] == [1.0, 1.0, 0.25]
    assert [r["file.log_rank"] for r in named] == [1.0, 1.0, pytest.approx(1.584962500)]
    assert [r["file.log_rank_within"] for r in named] == [pytest.approx(1.584962500), 1.0, 1.0]
    assert {r["task.names_path"] for r in named} == {1.0}
    assert {r["task.traceback"] for r in named} == {0.0}
    assert {r["task.mentions_test"] for r in named} == {0.0}
    assert all("custom" not in name for name in FEATURES)


@pytest.fixture(scope="module")
def pools(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("train")
    bench = build_fleet(tmp)
    env = cli_env(tmp)
    done = ctx04(env, "eval", "--dataset", bench.dataset, "--repos", bench.repos,
                 "--cache-dir", tmp / "trees", "--set", "top_k=300", "--out", tmp / "pools.jsonl")
    assert done.returncode == 0, done.stderr
    return tmp, bench.dataset, env


def test_train_writes_the_same_model_twice(pools: tuple[Path, Path, dict[str, str]]) -> None:
    tmp, dataset, env = pools
    runs = [
        ctx04(env, "train", tmp / "pools.jsonl", "--dataset", dataset,
              "--out", tmp / f"model{n}.json", "--report", tmp / f"cv{n}.md")
        for n in (1, 2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first = (tmp / "model1.json").read_bytes()
    assert first == (tmp / "model2.json").read_bytes()
    model = json.loads(first)
    assert (model["format"], model["version"], model["tasks"]) == ("ctx04-ranking-model", 1, 5)
    assert model["features"] == list(FEATURES)
    assert model["learner"] in ("logistic", "lambdarank")
    assert model["calibration"]["scale"] > 0
    assert load_model(tmp / "model1.json").calibration == Calibration(
        model["calibration"]["scale"], model["calibration"]["shift"]
    )
    assert "calibrated on the held-out scores: log-odds of a changed line = " in runs[0].stdout
    assert "its leader clears the slice's doubt gate (p >= 0.3, >= 2x the next) on " in (
        runs[0].stdout
    )
    report = (tmp / "cv1.md").read_text()
    rows = [line.split(" | ")[:2] for line in report.splitlines() if line.startswith("| acme/")]
    fused = [f"rank fusion k={k} w={w}" for k, w in ((5, 0.5), (5, 1), (5, 2), (20, 2), (5, 4))]
    names = ["weighted"] + [
        name for learner in ("logistic", "lambdarank")
        for name in (learner, *(f"{learner} + {fusion}" for fusion in fused))
    ]
    assert rows == [[f"| {repo}", name] for repo in ("acme/calc", "acme/shop") for name in names]
    block = report.split("Held-out calibration")[1].split("\n\n")[1].splitlines()
    assert [line.split(" | ")[0] for line in block[2:]] == ["| logistic", "| lambdarank"]
    # Of the 60 held-out candidates, 8 at p >= 0.3, 4 of them gold; 2 tasks'
    # leaders clear the gate, both right; of the 3 in doubt, 2 right.
    assert block[2].endswith(
        " | 10: 0.018 / 0.100 | 33: 0.056 / 0.000 | 9: 0.193 / 0.222 | 8: 0.426 / 0.500"
        " | 2 of 5 tasks | 1.00 | 0.67 |"
    )
    # Five tasks are too few for the trees to tell a changed line apart held out.
    assert block[3] == "| lambdarank | not calibrated" + " | -" * 8 + " |"
    # The weighted fusion's row reads the records' own order: its file Acc@1
    # is the eval run's.
    weighted = next(line for line in report.splitlines() if line.startswith("| weighted"))
    file_acc_1 = sum(r["metrics"]["file_acc@1"] for r in records(tmp / "pools.jsonl")) / 5
    assert weighted.split(" | ")[2] == f"{file_acc_1:.3f}"


def test_fold_models_rank_each_training_task_held_out(
    pools: tuple[Path, Path, dict[str, str]],
) -> None:
    from ctx04_core.ranking.fit import FITTERS, RankFusion, model_document
    from ctx04_core.ranking.table import task_rows

    tmp, dataset, env = pools
    folds = tmp / "folds"
    done = ctx04(env, "train", tmp / "pools.jsonl", "--dataset", dataset,
                 "--out", tmp / "chosen.json", "--fold-models", folds)
    assert done.returncode == 0, done.stderr
    assert f"fold models: {folds} (2 repositories)" in done.stdout
    assert sorted(p.name for p in folds.iterdir()) == ["acme__calc.json", "acme__shop.json"]
    chosen = json.loads((tmp / "chosen.json").read_text())
    texts = {json.loads(line)["instance_id"]: json.loads(line)["problem_statement"]
             for line in dataset.read_text().splitlines()}
    tasks = [task_rows(r, texts[r["instance_id"]]) for r in records(tmp / "pools.jsonl")]
    fused = chosen.get("rank_fusion")
    fusion = RankFusion(fused["k"], fused["model_weight"]) if fused else None
    for left_out in ("acme/calc", "acme/shop"):
        kept = [t for t in tasks if t is not None and t.repo != left_out]
        _, fitted = FITTERS[chosen["learner"]](kept)
        written = json.loads((folds / f"{left_out.replace('/', '__')}.json").read_text())
        assert written["tasks"] == len(kept) == (3 if left_out == "acme/calc" else 2)
        assert written["calibration"] == chosen["calibration"]
        assert written == json.loads(json.dumps(model_document(
            chosen["learner"], fitted, fusion, len(kept),
            load_model(tmp / "chosen.json").calibration,
        )))
    repos = tmp / "fleet-repos.json"
    base = ["eval", "--dataset", dataset, "--repos", repos, "--cache-dir", tmp / "trees",
            "--set", "fusion=learned"]
    done = ctx04(env, *base, "--fold-models", folds, "--out", tmp / "held.jsonl")
    assert done.returncode == 0, done.stderr
    held = records(tmp / "held.jsonl")
    assert {r["settings"]["fold_models"] for r in held} == {str(folds)}
    alone = {}
    for model in ("acme__calc", "acme__shop"):
        done = ctx04(env, *base, "--set", f"ranking_model={folds / model}.json",
                     "--out", tmp / f"{model}.jsonl")
        assert done.returncode == 0, done.stderr
        alone[model] = records(tmp / f"{model}.jsonl")
    # Each task's ranking is its own repository's fold model's, score for score;
    # the two models score every task apart.
    for n, record in enumerate(held):
        own, other = sorted(alone, key=lambda m: m != record["repo"].replace("/", "__"))
        assert (record["ranked"], record["shown"]) == (
            alone[own][n]["ranked"], alone[own][n]["shown"]
        )
        assert record["ranked"] != alone[other][n]["ranked"]
    # A repository without its model, or a run that would not read it, is refused.
    (tmp / "half").mkdir()
    (tmp / "half" / "acme__calc.json").write_bytes((folds / "acme__calc.json").read_bytes())
    for extra, message in (
        (("--fold-models", tmp / "half"),
         f"--fold-models {tmp / 'half'}: no model for acme/shop (as acme__shop.json); write "
         "them with ctx04 train --fold-models on these tasks' pools"),
        (("--fold-models", tmp / "nowhere"),
         f"--fold-models {tmp / 'nowhere'}: no such folder; write it with ctx04 train "
         "--fold-models"),
        (("--fold-models", folds, "--set", "fusion=weighted"),
         "--fold-models ranks with ctx04's learned fusion; drop --system or --set fusion"),
    ):
        done = ctx04(env, *base, *extra, "--out", tmp / "refused.jsonl")
        assert done.returncode == 2
        assert message in done.stderr
    assert not (tmp / "refused.jsonl").exists()


def test_train_refuses_what_it_cannot_use(pools: tuple[Path, Path, dict[str, str]]) -> None:
    tmp, dataset, env = pools
    lines = (tmp / "pools.jsonl").read_text().splitlines()
    calc_only = tmp / "calc-only.jsonl"
    calc_only.write_text("\n".join(lines[:2]) + "\n")
    done = ctx04(env, "train", calc_only, "--dataset", dataset, "--out", tmp / "m.json")
    assert done.returncode == 2
    assert "training needs tasks from at least two repositories" in done.stderr
    stranger = tmp / "stranger.jsonl"
    stranger.write_text(json.dumps({**json.loads(lines[0]), "instance_id": "x__y-1"}) + "\n")
    done = ctx04(env, "train", stranger, "--dataset", dataset, "--out", tmp / "m.json")
    assert done.returncode == 2
    assert f"{stranger}:1: 'x__y-1' is in no --dataset" in done.stderr
    # A pool in the learned order (the default fusion): the CV would read it
    # as the weighted order, its baseline.
    first = json.loads(lines[0])
    learned = tmp / "learned.jsonl"
    learned.write_text(json.dumps({**first, "settings": {**first["settings"],
                                                          "fusion": "learned"}}) + "\n")
    done = ctx04(env, "train", learned, "--dataset", dataset, "--out", tmp / "m.json")
    assert done.returncode == 2
    assert (f"{learned}:1: recorded with fusion 'learned'; pools are the weighted order's: "
            "ctx04 eval --set fusion=weighted --set top_k=300 ...") in done.stderr
    broken = tmp / "broken.jsonl"
    for text, message in (
        (lines[0] + "\n{not json\n", f"{broken}:2: not JSON ("),
        (lines[0] + "\n[1, 2]\n", f"{broken}:2: not a JSON object"),
        (b"\xff\n", f"{broken}: not UTF-8 ("),
    ):
        broken.write_bytes(text if isinstance(text, bytes) else text.encode())
        done = ctx04(env, "train", broken, "--dataset", dataset, "--out", tmp / "m.json")
        assert done.returncode == 2
        assert message in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp / "m.json").exists()


def test_the_choice_keeps_what_the_weighted_order_does_well() -> None:
    from ctx04_core.ranking.fit import CV_METRICS, CrossValidation, chosen
    from ctx04_core.ranking.model import RankFusion

    def result(learner: str, fusion: RankFusion | None, **moved: float) -> CrossValidation:
        pooled = {m: 0.5 + moved.get(m.replace("@", "_"), 0.0) for m in CV_METRICS}
        return CrossValidation(learner, fusion, pooled, {}, {})

    weighted = result("weighted", None)
    # Better on every chosen metric, but file Acc@10 falls by more than 0.01.
    bold = result("lambdarank", None, mrr=0.1, file_acc_10=-0.02)
    careful = result("lambdarank", RankFusion(5, 1), mrr=0.02, file_acc_10=-0.01)
    assert chosen([weighted, bold, careful]) == (careful, True)
    assert chosen([weighted, bold]) == (bold, False)


def test_calibration_is_the_logistic_fit_of_the_held_out_scores() -> None:
    from ctx04_core.ranking.fit import calibrate

    # Platt's targets: 5/6 for each of the 4 positives, 1/6 for each of the
    # 4 negatives; the mean target is 2/3 at score 1 and 1/3 at score -1, so
    # the fit is log-odds = ln(2) x score exactly.
    scores = [1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0]
    holds = [True, True, True, False, True, False, False, False]
    calibration = calibrate(scores, holds)
    assert calibration is not None
    assert calibration.scale == pytest.approx(math.log(2), abs=1e-12)
    assert calibration.shift == pytest.approx(0.0, abs=1e-12)
    # Scores that rank the changed lines last, or one score for all: no calibration.
    assert calibrate(scores, [not h for h in holds]) is None
    assert calibrate([2.0] * 8, holds) is None


def test_reliability_reads_the_probabilities_per_bin_and_per_leader() -> None:
    from ctx04_core.ranking.fit import reliability

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    held = [
        ([logit(0.5), logit(0.02)], [True, False]),  # its leader clears the gate, right
        ([logit(0.2), logit(0.05)], [False, True]),  # in doubt, its leader wrong
        # Probable, but not twice the next: in doubt, its leader wrong.
        ([logit(0.5), logit(0.4)], [False, True]),
        ([], []),  # no candidate, no leader
    ]
    found = reliability(held, Calibration(1.0, 0.0), 0.3, 2.0)

    assert [(b.low, b.high, b.candidates) for b in found.bins] == [
        (0.0, 0.03, 1), (0.03, 0.1, 1), (0.1, 0.3, 1), (0.3, 1.0, 3),
    ]
    assert [b.holding for b in found.bins] == pytest.approx([0.0, 1.0, 0.0, 2 / 3])
    assert [b.mean_probability for b in found.bins] == pytest.approx([0.02, 0.05, 0.2, 1.4 / 3])
    assert (
        found.gate, found.margin, found.sure, found.sure_right, found.doubtful,
        found.doubtful_right,
    ) == (0.3, 2.0, 1, 1, 2, 0)
    # The probability alone (a margin of 1) is sure of the two alike.
    alone = reliability(held, Calibration(1.0, 0.0), 0.3, 1.0)
    assert (alone.sure, alone.sure_right, alone.doubtful) == (2, 1, 1)
    # A shift moves every probability: the first two leaders now clear the gate.
    shifted = reliability(held, Calibration(1.0, 2.0), 0.3, 2.0)
    assert (shifted.sure, shifted.sure_right, shifted.doubtful) == (2, 1, 1)
    # Scores far past what exp can take read as 0 and 1, not an overflow.
    extreme = reliability([([-1000.0, 1000.0], [False, True])], Calibration(1.0, 0.0), 0.3, 2.0)
    assert [b.candidates for b in extreme.bins] == [1, 0, 0, 1]
    assert (extreme.sure, extreme.sure_right) == (1, 1)


def test_the_calibration_table_reads_each_dataset_apart() -> None:
    from ctx04_core.ranking.cli import calibration_table
    from ctx04_core.ranking.fit import CrossValidation, reliability

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    held = {
        "py-1": ([logit(0.5), logit(0.02)], [True, False]),  # sure, right
        "py-2": ([logit(0.2), logit(0.05)], [False, True]),  # in doubt, wrong
        "go-1": ([logit(0.5), logit(0.4)], [False, True]),  # in doubt, wrong
    }
    calibration = Calibration(1.0, 0.0)
    pooled = reliability(list(held.values()), calibration, 0.3, 2.0)
    result = CrossValidation(
        "logistic", None, {}, {}, {}, calibration, pooled, held_out=held
    )
    splits = {"train.jsonl": ["py-1", "py-2"], "train_go.jsonl": ["go-1"]}

    rows = [line for line in calibration_table([result], splits) if line.startswith("| log")]
    assert rows == [
        "| logistic | 1 | 0 | 1: 0.020 / 0.000 | 1: 0.050 / 1.000 | 1: 0.200 / 0.000"
        " | 3: 0.467 / 0.667 | 1 of 3 tasks | 1.00 | 0.00 |",
        "| logistic, train.jsonl | 1 | 0 | 1: 0.020 / 0.000 | 1: 0.050 / 1.000"
        " | 1: 0.200 / 0.000 | 1: 0.500 / 1.000 | 1 of 2 tasks | 1.00 | 0.00 |",
        "| logistic, train_go.jsonl | 1 | 0 | 0: 0.000 / 0.000 | 0: 0.000 / 0.000"
        " | 0: 0.000 / 0.000 | 2: 0.450 / 0.500 | 0 of 1 tasks | - | 0.00 |",
    ]
    # One dataset: its rows would repeat the pooled one.
    alone = calibration_table([result], {"train.jsonl": list(held)})
    assert [line for line in alone if line.startswith("| log")] == rows[:1]


def test_a_task_whose_recall_found_nothing_counts_as_a_miss() -> None:
    from ctx04_core.bench.gold import Gold
    from ctx04_core.ranking.fit import cross_validate
    from ctx04_core.ranking.table import Labels, TaskRows

    def task(name: str, repo: str, size: int) -> TaskRows:
        candidates = tuple(
            Candidate(Span(f"{name}.py", 10 * i + 1, 10 * i + 5), "function", f"{name}.f{i}",
                      ("ripgrep",))
            for i in range(size)
        )
        rows = tuple(tuple(float((i + j) % 3) for j in range(len(FEATURES)))
                     for i in range(size))
        labels = tuple(Labels(i == 0, i == 0, True) for i in range(size))
        gold = Gold.from_json({
            "files": [f"{name}.py"], "lines": {f"{name}.py": [2]},
            "symbols": [{"path": f"{name}.py", "qualname": f"{name}.f0",
                         "kind": "function", "region": [[1, 5]]}],
        })
        return TaskRows(name, repo, candidates, rows, labels, gold)

    tasks = [task("a", "r/one", 4), task("b", "r/two", 4), task("c", "r/three", 4),
             task("empty", "r/three", 0)]
    for learner in ("weighted", "logistic", "lambdarank"):
        for result in cross_validate(learner, tasks):
            assert set(result.per_task["empty"].values()) == {0.0}
            assert result.per_task["a"]["file_acc@1"] == 1.0


def test_a_container_holds_a_changed_line_only_when_the_line_is_its_own() -> None:
    from ctx04_core.ranking.table import Labels, task_rows

    def item(path: str, start: int, end: int, kind: str, qualname: str) -> dict[str, Any]:
        return {"path": path, "start_line": start, "end_line": end, "kind": kind,
                "qualname": qualname, "score": 1.0, "signals": {"bm25": 1.0}}

    record = {
        "instance_id": "t-1", "repo": "o/r", "error": None,
        "gold": {
            "files": ["m.py"], "lines": {"m.py": [12, 31]},
            "symbols": [
                {"path": "m.py", "qualname": "m.A.load", "kind": "method",
                 "region": [[10, 14]]},
                {"path": "m.py", "qualname": "m.B", "kind": "class", "region": [[30, 32]]},
            ],
        },
        "ranked": [
            item("m.py", 1, 40, "module", "m"),          # holds both lines, owns neither
            item("m.py", 5, 20, "class", "m.A"),         # holds line 12 in its member
            item("m.py", 10, 14, "method", "m.A.load"),  # the gold symbol
            item("m.py", 30, 40, "class", "m.B"),        # owns line 31 (its base class)
            item("m.py", 8, 16, "function", "m.outer"),  # a function around the change
            item("n.py", 1, 9, "function", "n.f"),
            # B's name on other lines (a Rust impl beside its struct): not the
            # lines of the B that owns line 31.
            item("m.py", 50, 60, "impl", "m.B"),
        ],
    }
    rows = task_rows(record, "A.load ignores B")
    assert rows is not None
    assert rows.labels == (
        Labels(False, False, True), Labels(False, False, True), Labels(True, True, True),
        Labels(True, True, True), Labels(True, False, True), Labels(False, False, False),
        Labels(False, True, True),
    )


def test_a_placed_candidate_in_a_pool_is_no_row() -> None:
    from ctx04_core.ranking.table import task_rows

    def item(
        path: str, qualname: str | None, kind: str, signals: dict[str, float]
    ) -> dict[str, Any]:
        return {"path": path, "start_line": 1, "end_line": 9, "kind": kind,
                "qualname": qualname, "score": 2.0 if signals else 0.0, "signals": signals,
                "sources": ["bm25"] if signals else ["changelog"]}

    scored = [item("m.py", "m.f", "function", {"bm25": 1.0, "history": 0.5}),
              item("n.py", "n.g", "function", {"bm25": 0.5, "history": 0.0})]
    # Since the running changelog is placed after the ranking, a pool recorded
    # with it holds a candidate no signal scored.
    changelog = item("CHANGES.md", None, "lines", {})
    record = {
        "instance_id": "t-1", "repo": "o/r", "error": None,
        "gold": {"files": ["m.py", "CHANGES.md"], "lines": {"m.py": [3], "CHANGES.md": [2]},
                 "symbols": [{"path": "m.py", "qualname": "m.f", "kind": "function",
                              "region": [[1, 9]]}]},
        "ranked": scored,
    }
    plain = task_rows(record, "f fails")
    placed = task_rows({**record, "ranked": [scored[0], changelog, scored[1]]}, "f fails")
    assert plain is not None and placed is not None
    assert [c.span.path for c in placed.candidates] == ["m.py", "n.py"]
    assert placed.rows == plain.rows
    assert placed.labels == plain.labels


def test_own_line_recall_reads_a_container_as_its_own_lines() -> None:
    from ctx04_core.bench.gold import Gold
    from ctx04_core.ranking.fit import ranked_metrics
    from ctx04_core.ranking.table import Labels, TaskRows

    candidates = (
        Candidate(Span("m.py", 1, 40), "module", "m", ("bm25",)),
        Candidate(Span("m.py", 30, 40), "class", "m.B", ("bm25",)),
        Candidate(Span("m.py", 10, 14), "method", "m.A.load", ("bm25",)),
    )
    gold = Gold.from_json({
        "files": ["m.py"], "lines": {"m.py": [12, 31, 38]},
        "symbols": [
            {"path": "m.py", "qualname": "m.A.load", "kind": "method", "region": [[10, 14]]},
            {"path": "m.py", "qualname": "m.B", "kind": "class", "region": [[30, 32]]},
            {"path": "m.py", "qualname": "m.B.save", "kind": "method", "region": [[36, 40]]},
        ],
    })
    task = TaskRows("t-1", "o/r", candidates, ((0.0,),) * 3, (Labels(False, False, True),) * 3,
                    gold)
    # The module holds all three lines but owns none; B owns 31, not its
    # method's 38; load owns 12.
    assert ranked_metrics(task, [0])["own_line_recall@5"] == 0.0
    assert ranked_metrics(task, [0])["line_recall@5"] == 1.0
    assert ranked_metrics(task, [0, 1])["own_line_recall@5"] == pytest.approx(1 / 3)
    assert ranked_metrics(task, [0, 1, 2])["own_line_recall@5"] == pytest.approx(2 / 3)
