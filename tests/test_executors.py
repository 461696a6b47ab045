"""eval, ablate and index --repos on every executor: local processes and a real Ray cluster.

Five instances over two temp git repositories (bench_fixture.build_fleet);
one Ray cluster (2 CPUs, on this machine) serves the whole module and the
CLI joins it with --ray-address, as a user joins theirs. A sixth instance
holds the marker of the test-only plugin ctx04_worker_exit, which ends its
worker process with os._exit: the run must retry it, record it as an error
and go on. The plugin logs each death to CTX04_TEST_EXIT_LOG, so the tests
count the attempts.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import ray
from bench_fixture import TIMINGS, Bench, build, build_fleet, cli_env, ctx04, untimed
from ctx04_worker_exit import MARKER

from ctx04_core.bench.dataset import load_instances, load_repo_map
from ctx04_core.bench.metrics import FAILED
from ctx04_core.bench.runner import RunConfig, run
from ctx04_core.plugins import plugin_manager

FLEET_IDS = ["acme__calc-1", "acme__calc-2", "acme__shop-1", "acme__shop-2", "acme__shop-3"]
ATTEMPTS = "worker: the worker process died on each of 3 attempts"


@dataclass(frozen=True)
class Fleet:
    bench: Bench
    tmp: Path
    env: dict[str, str]
    with_exit: Path  # the fleet plus acme__shop-9, whose worker dies
    serial: list[dict[str, Any]]  # the serial run's records, without timings


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    tmp = tmp_path_factory.mktemp("fleet")
    bench = build_fleet(tmp)
    env = cli_env(tmp)
    lines = bench.dataset.read_text().splitlines()
    doomed = json.loads(lines[3]) | {"instance_id": "acme__shop-9"}
    doomed["problem_statement"] += f"\n\n{MARKER}"
    with_exit = tmp / "with-exit.jsonl"
    with_exit.write_text("\n".join([*lines[:2], json.dumps(doomed), *lines[2:]]) + "\n")
    done = ctx04(env, "eval", "--dataset", bench.dataset, "--repos", bench.repos,
                 "--cache-dir", tmp / "trees", "--out", tmp / "serial.jsonl")
    assert done.returncode == 0, done.stderr
    serial = untimed(tmp / "serial.jsonl")
    assert [r["instance_id"] for r in serial] == FLEET_IDS
    assert [r["error"] for r in serial] == [None] * 5
    return Fleet(bench, tmp, env, with_exit, serial)


@dataclass(frozen=True)
class Cluster:
    address: str
    env: dict[str, str]  # the fleet's, plus what a driver needs to join (its auth mode)


@pytest.fixture(scope="module")
def cluster(fleet: Fleet) -> Iterator[Cluster]:
    """A local Ray cluster of 2 CPUs; its workers inherit the environment set here."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", fleet.env["XDG_CACHE_HOME"])
        patch.setenv("CTX04_TEST_EXIT_LOG", str(fleet.tmp / "ray-exits.log"))
        patch.delenv("CTX04_DISABLE", raising=False)
        context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        # ray.init sets RAY_AUTH_MODE for its cluster; a driver joining it needs the same.
        joining = {k: v for k, v in os.environ.items() if k.startswith("RAY_")}
    yield Cluster(str(context.address_info["gcs_address"]), fleet.env | joining)
    ray.shutdown()


def evaluate(fleet: Fleet, dataset: Path, name: str, *options: str,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return ctx04(env or fleet.env, "eval", "--dataset", dataset, "--repos", fleet.bench.repos,
                 "--cache-dir", fleet.tmp / "trees", "--out", fleet.tmp / name, *options)


def test_jobs_2_equals_serial(fleet: Fleet) -> None:
    done = evaluate(fleet, fleet.bench.dataset, "jobs.jsonl", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    assert "5 instances, 0 errored" in done.stdout
    assert untimed(fleet.tmp / "jobs.jsonl") == fleet.serial


@pytest.mark.ray
def test_ray_equals_serial(fleet: Fleet, cluster: Cluster) -> None:
    done = evaluate(fleet, fleet.bench.dataset, "ray.jsonl", "--executor", "ray",
                    "--ray-address", cluster.address, env=cluster.env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ctx04 eval: ctx04: 5 instances, 0 errored\n")
    assert untimed(fleet.tmp / "ray.jsonl") == fleet.serial


def check_dead_worker_run(fleet: Fleet, done: subprocess.CompletedProcess[str], out: Path,
                          exits: Path) -> str:
    """The run went on: the doomed instance is an error scored as nothing, the rest as
    serially; its worker died three times (two retries). Returns its error."""
    assert done.returncode == 0, done.stderr
    assert "6 instances, 1 errored" in done.stdout
    records = untimed(out)
    doomed = records.pop(2)
    assert records == fleet.serial
    assert (doomed["instance_id"], doomed["gold"], doomed["ranked"], doomed["metrics"]) == (
        "acme__shop-9", None, [], FAILED
    )
    deaths = exits.read_text().splitlines()
    assert len(deaths) == 3 and len(set(deaths)) == 3  # three processes
    error: str = doomed["error"]
    return error


@pytest.mark.ray
def test_ray_retries_a_dead_worker_then_records_the_error(
    fleet: Fleet, cluster: Cluster
) -> None:
    done = evaluate(fleet, fleet.with_exit, "ray-exit.jsonl", "--executor", "ray",
                    "--ray-address", cluster.address, env=cluster.env)
    error = check_dead_worker_run(fleet, done, fleet.tmp / "ray-exit.jsonl",
                                  fleet.tmp / "ray-exits.log")
    assert error.startswith(f"{ATTEMPTS} (WorkerCrashedError: ")
    # Ray reports the deaths on stdout; they go to stderr, away from the summary.
    assert "(raylet)" not in done.stdout


def test_jobs_retry_a_dead_worker_then_record_the_error(fleet: Fleet) -> None:
    exits = fleet.tmp / "jobs-exits.log"
    env = fleet.env | {"CTX04_TEST_EXIT_LOG": str(exits)}
    done = evaluate(fleet, fleet.with_exit, "jobs-exit.jsonl", "--jobs", "2", env=env)
    error = check_dead_worker_run(fleet, done, fleet.tmp / "jobs-exit.jsonl", exits)
    assert error == ATTEMPTS


@pytest.mark.ray
def test_ablate_on_ray(fleet: Fleet, cluster: Cluster) -> None:
    out = fleet.tmp / "ablation"
    done = ctx04(cluster.env, "ablate", "--dataset", fleet.bench.dataset, "--repos",
                 fleet.bench.repos, "--cache-dir", fleet.tmp / "trees", "--plugins", "prune",
                 "--limit", "2", "--executor", "ray", "--ray-address", cluster.address,
                 "--out-dir", out)
    assert done.returncode == 0, done.stderr
    assert untimed(out / "full.jsonl") == fleet.serial[:2]
    assert {tuple(r["disabled"]) for r in untimed(out / "no-prune.jsonl")} == {("prune",)}
    assert re.search(r"^prune: keep \(", done.stdout, flags=re.MULTILINE)


def index_rows(stdout: str) -> list[list[str]]:
    rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0] != "repository":
            rows.append(cells)
    return rows


@pytest.mark.ray
def test_index_repos_on_every_executor(fleet: Fleet, cluster: Cluster) -> None:
    repos = fleet.tmp / "index-repos.json"
    # calc is given as its git directory (indexed at HEAD, commit C), shop as
    # its work tree; the third does not exist.
    repos.write_text(json.dumps({
        "acme/calc": str(fleet.bench.repo / ".git"), "acme/shop": "shop", "acme/gone": "gone",
    }))
    tables = {}
    for name, options in [("serial", ()), ("jobs", ("--jobs", "2")),
                          ("ray", ("--executor", "ray", "--ray-address", cluster.address))]:
        index_dir = fleet.tmp / f"indexes-{name}"
        done = ctx04(cluster.env, "index", "--repos", repos, "--index-dir", index_dir, *options)
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip() == "ctx04 index: 1 of 3 repositories not indexed"
        assert sorted(p.name for p in index_dir.iterdir()) == ["acme__calc", "acme__shop"]
        rows = index_rows(done.stdout)
        # seconds vary; the rest is the same on every executor.
        tables[name] = [row[:4] + row[5:] for row in rows]
        assert all(re.fullmatch(r"\d+\.\d\d", row[4]) for row in rows)
    assert tables["serial"] == [
        # calc at C: __init__, ops, fmt, new (README.md is no source).
        ["acme/calc", "4", "4", "0", str(fleet.tmp / "indexes-serial/acme__calc/index.sqlite3")],
        ["acme/shop", "6", "6", "0", str(fleet.tmp / "indexes-serial/acme__shop/index.sqlite3")],
        ["acme/gone", "0", "0", "0", f"RepoError: repository not found: {fleet.tmp / 'gone'}"],
    ]
    for name in ("jobs", "ray"):
        assert tables[name] == [
            [cell.replace("indexes-serial", f"indexes-{name}") for cell in row]
            for row in tables["serial"]
        ]


def test_executor_options_bad_input_exits_2(fleet: Fleet, tmp_path: Path) -> None:
    common = ("--dataset", fleet.bench.dataset, "--repos", fleet.bench.repos,
              "--out", tmp_path / "x.jsonl")
    done = ctx04(fleet.env, "eval", *common, "--executor", "ray", "--jobs", "2")
    assert done.returncode == 2 and "--jobs is for --executor local" in done.stderr
    done = ctx04(fleet.env, "eval", *common, "--ray-address", "auto")
    assert done.returncode == 2 and "--ray-address needs --executor ray" in done.stderr
    done = ctx04(fleet.env, "index", "--repo", fleet.bench.repo, "--jobs", "2")
    assert done.returncode == 2 and "--jobs and --executor are for --repos" in done.stderr
    # Without Ray installed (an import that fails, as it does then): one line, nothing written.
    shadow = tmp_path / "no-ray"
    shadow.mkdir()
    (shadow / "ray.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    done = ctx04(fleet.env | {"PYTHONPATH": str(shadow)}, "eval", *common, "--executor", "ray")
    assert done.returncode == 2
    assert done.stderr == (
        "ctx04: error: --executor ray needs Ray, which is not installed: "
        "pip install 'ctx04[ray]'\n"
    )
    assert not (tmp_path / "x.jsonl").exists()


def test_a_plugin_installed_mid_run_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entry points are read once per run: one that appears halfway (a plugin
    installed meanwhile, its module not importable by this process) is not loaded."""
    bench = build(tmp_path)
    instances = load_instances(bench.dataset)
    repos = load_repo_map(bench.repos)
    config = RunConfig(cache_dir=tmp_path / "trees")
    before = run(instances, repos, config, tmp_path / "before.jsonl")
    site = tmp_path / "site"
    info = site / "ctx04_ghost-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctx04-ghost\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ctx04]\nghost = ctx04_ghost_not_importable\n")

    def install(record: dict[str, Any]) -> None:
        if record["instance_id"] == "acme__calc-1":
            monkeypatch.syspath_prepend(str(site))
            importlib.invalidate_caches()

    during = run(instances, repos, config, tmp_path / "during.jsonl", install)
    # Loading the entry points again now fails, as it did for every later instance.
    with pytest.raises(ModuleNotFoundError, match="ctx04_ghost_not_importable"):
        plugin_manager()
    assert [r["error"] for r in during] == [None, None]
    strip = [{k: v for k, v in r.items() if k not in TIMINGS} for r in before]
    assert [{k: v for k, v in r.items() if k not in TIMINGS} for r in during] == strip


ORPHAN_DRIVER = """
import os, sys, time
from pathlib import Path
from ctx04_core.executors import Executor, run_tasks

def task(name):
    Path(sys.argv[1], name).write_text(str(os.getpid()))
    time.sleep(300)

if __name__ == "__main__":
    list(run_tasks(Executor(jobs=2), task, ["a", "b"]))
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's new parent may never reap it here)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    """`ctx04 eval --jobs N` killed: its workers end too, not after their tasks."""
    import signal
    import sys
    import time

    driver = tmp_path / "driver.py"
    driver.write_text(ORPHAN_DRIVER)
    marks = tmp_path / "pids"
    marks.mkdir()
    parent = subprocess.Popen([sys.executable, str(driver), str(marks)])
    pids: list[int] = []
    try:
        for _ in range(600):  # the workers start in at most 60 s
            if len(list(marks.iterdir())) == 2:
                break
            time.sleep(0.1)
        pids = sorted(int(p.read_text()) for p in marks.iterdir())
        assert len(pids) == 2
        assert all(_running(pid) for pid in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        for _ in range(100):  # tasks would sleep 300 s; the watch ends them in ~0.5 s
            if not any(_running(pid) for pid in pids):
                break
            time.sleep(0.1)
        assert [pid for pid in pids if _running(pid)] == []
    finally:
        parent.kill()
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
