"""A third party extends ctx04 without touching it.

``ctx04-pin`` (tests/plugins/ctx04_pin) is installed as its own distribution
and found through the ``ctx04`` entry-point group, exactly as the bundled
plugins are; it proposes code marked ``# ctx04: pin`` whatever the task.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_git_repo

from ctx04_core.pipeline import open_repo, retrieve, run_stages
from ctx04_core.plugins import PluginInfo, describe_plugins, plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.types import RankedCandidate, Span

BILLING: dict[str, str | bytes] = {
    "billing.py": (
        "def invoice_total(lines):\n"
        "    return sum(lines)\n"
        "\n"
        "\n"
        "def tax_rate(region):\n"
        "    # Must match the legal table in tax.yaml.  # ctx04: pin\n"
        '    return {"eu": 0.2}.get(region, 0.0)\n'
    ),
    "vendor/lib.py": "x = 1  # ctx04: pin\n",  # excluded folders stay excluded
}
TASK = "invoice_total returns the wrong sum"


def pinned(ranked: tuple[RankedCandidate, ...]) -> list[tuple[str | None, Span, tuple[str, ...]]]:
    return [
        (r.candidate.qualname, r.candidate.span, r.candidate.sources)
        for r in ranked
        if "pin" in r.candidate.sources
    ]


def test_the_plugin_is_found_through_the_entry_point_group() -> None:
    pm = plugin_manager()
    assert pm.get_plugin("pin") is not None
    infos = {info.name: info for info in describe_plugins(pm)}
    assert infos["pin"] == PluginInfo(
        "pin", ("recall", "signals"), "ctx04-pin", "0.1.0", enabled=True
    )
    assert {"ripgrep", "apidesc", "callgraph"} <= infos.keys()


def test_a_retrieval_recalls_the_pinned_region(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", BILLING).resolve()
    pm, settings = plugin_manager(), Settings()
    repo, _ = open_repo(root, pm, settings)
    try:
        query = build_query(TASK, names=repo.index.names(), settings=settings)
        result = run_stages(pm, query, repo, settings)
    finally:
        repo.index.close()
    # One marked line outside vendor/; the task never mentions tax_rate, the
    # pin alone brings it, widened by merge from the marked line to its function.
    assert result.recalled["pin"] == 1
    assert pinned(result.ranked) == [("billing.tax_rate", Span("billing.py", 5, 7), ("pin",))]


def test_disabling_the_plugin_by_name_removes_it(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", BILLING).resolve()
    pm = plugin_manager(disable=["pin"])
    assert pm.get_plugin("pin") is None
    infos = {info.name: info for info in describe_plugins(pm)}
    assert infos["pin"] == PluginInfo(
        "pin", ("recall", "signals"), "ctx04-pin", "0.1.0", enabled=False
    )
    assert pinned(retrieve(TASK, root, disable=["pin"]).candidates) == []
    assert pinned(retrieve(TASK, root).candidates) == [
        ("billing.tax_rate", Span("billing.py", 5, 7), ("pin",))
    ]


def test_disabling_it_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_git_repo(tmp_path / "r", BILLING).resolve()
    monkeypatch.setenv("CTX04_DISABLE", "pin")
    assert pinned(retrieve(TASK, root).candidates) == []


def test_its_signal_stacks_with_the_bundled_ones(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", BILLING).resolve()
    task = "the tax_rate and invoice_total of a region"
    plain = retrieve(task, root, settings=Settings(signal_weights=("pin=0",))).candidates
    pinned_up = retrieve(task, root).candidates
    by_name = {r.candidate.qualname: r for r in pinned_up}
    before = {r.candidate.qualname: r.score for r in plain}
    # The pin doubles the fused score of the marked function only.
    assert by_name["billing.tax_rate"].score == pytest.approx(2 * before["billing.tax_rate"])
    assert by_name["billing.invoice_total"].score == before["billing.invoice_total"]
    assert dict(by_name["billing.tax_rate"].signals)["pin"] == 1.0
    assert dict(by_name["billing.invoice_total"].signals)["pin"] == 0.0
    assert [name for name, _ in by_name["billing.tax_rate"].signals] == [
        "auxiliary", "bm25", "definition", "history", "history_definition", "meaning",
        "neighbour", "path", "pin", "pointed_at", "title",
    ]
    assert "pin" not in dict(retrieve(task, root, disable=["pin"]).candidates[0].signals)
