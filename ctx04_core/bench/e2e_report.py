"""Reading the SWE-bench harness's verdicts back: the §7.2 partition and the §7.3 figures.

``ctx04 e2e run`` leaves ``calls.jsonl`` (every call's arm, outcome, tokens
and cost); the harness (``python -m swebench.harness.run_evaluation``)
leaves one report per predictions file, a JSON object whose
``resolved_ids`` lists the instances its tests passed. Together they give:

- per arm (spec §7.3): resolve rate = resolved / instances, cost = model
  spend per instance (USD), tokens = prompt + completion tokens per
  instance, and how the calls ended;
- the oracle-context diagnostic (spec §7.2), over the instances both the
  ``retrieved`` and the ``oracle`` arm asked the model about:

  | oracle | retrieved | verdict |
  |---|---|---|
  | resolved | not | retrieval failure |
  | not | not | reasoning failure |
  | resolved | resolved | not the bottleneck |
  | not | resolved | curation beats the gold slice |

An instance whose slice could not be made in either arm (``skipped``) is
left out of the partition and listed as excluded: it says nothing about the
model or the retriever. The report (``ctx04.e2e-report.v1``) keeps every
instance's outcome per arm; ``ctx04 ab`` reads its resolve, cost and tokens.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctx04_core.bench.e2e import ARMS, CALLS, SCHEMA, SKIPPED
from ctx04_core.bench.jsonl import json_lines, read_text

REPORT_SCHEMA = "ctx04.e2e-report.v1"
REPORT = "e2e-report.json"
# The §7.2 cells, in the spec's order: (name, oracle resolved, retrieved resolved).
VERDICTS: tuple[tuple[str, bool, bool], ...] = (
    ("retrieval failure", True, False),
    ("reasoning failure", False, False),
    ("not the bottleneck", True, True),
    ("curation beats the gold slice", False, True),
)


class ReportError(ValueError):
    """A calls file, harness report or e2e report that cannot be used; one line."""


def load_calls(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / CALLS
    records = []
    for number, record in json_lines(path, ReportError):
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            raise ReportError(f"{path}:{number}: not a {SCHEMA} record")
        records.append(record)
    if not records:
        raise ReportError(f"{path}: no call recorded")
    return records


def load_resolved(path: Path) -> tuple[set[str], set[str] | None]:
    """A harness report's resolved ids, and its submitted ids when it lists them."""
    try:
        data = json.loads(read_text(path, ReportError))
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}: not JSON ({err})") from err
    resolved = _ids(data.get("resolved_ids") if isinstance(data, dict) else None)
    if resolved is None:
        raise ReportError(f"{path}: not a SWE-bench harness report (no resolved_ids list)")
    submitted = _ids(data.get("submitted_ids"))
    if submitted is None and data.get("submitted_ids") is not None:
        raise ReportError(f"{path}: submitted_ids is not a list of instance ids")
    return resolved, submitted


def build_report(
    calls: Sequence[dict[str, Any]], resolved: Mapping[str, tuple[set[str], set[str] | None]],
    sources: Mapping[str, str],
) -> dict[str, Any]:
    """The e2e report from the run's calls and, per arm, a harness report's ids
    (``sources`` names each report's file, for the messages)."""
    by_arm: dict[str, dict[str, dict[str, Any]]] = {}
    for call in calls:
        by_arm.setdefault(call["arm"], {})[call["instance_id"]] = call
    for arm, (ids, submitted) in resolved.items():
        if arm not in by_arm:
            raise ReportError(f"{sources[arm]}: the run has no {arm!r} arm "
                              f"(it has {', '.join(by_arm)})")
        predicted = set(by_arm[arm])
        strangers = sorted(ids - predicted)
        if strangers:
            raise ReportError(f"{sources[arm]}: resolves {len(strangers)} instance(s) the run's "
                              f"{arm} arm did not predict: {', '.join(strangers[:5])}")
        if submitted is not None and not predicted <= submitted:
            unseen = sorted(predicted - submitted)
            raise ReportError(f"{sources[arm]}: the harness was not given {len(unseen)} of the "
                              f"{arm} predictions: {', '.join(unseen[:5])}")
    instances: dict[str, dict[str, Any]] = {}
    for arm in (a for a in ARMS if a in by_arm):
        for iid, call in by_arm[arm].items():
            ids_ = resolved.get(arm)
            instances.setdefault(iid, {})[arm] = {
                "outcome": call["outcome"],
                "resolved": None if ids_ is None else iid in ids_[0],
                "cost": call["cost_usd"], "tokens": call["tokens"],
            }
    arms = {arm: _figures(arm, instances) for arm in ARMS if arm in by_arm}
    return {
        "schema": REPORT_SCHEMA, "arms": arms, **_partition(instances, resolved),
        "instances": instances,
    }


def _figures(arm: str, instances: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The §7.3 figures of one arm over the instances it was run on."""
    rows = [per_arm[arm] for per_arm in instances.values() if arm in per_arm]
    count = len(rows)
    measured = all(r["resolved"] is not None for r in rows)
    resolved = sum(bool(r["resolved"]) for r in rows) if measured else None
    return {
        "instances": count,
        "resolved": resolved,
        "resolve_rate": None if resolved is None else resolved / count,
        "cost_per_instance": sum(r["cost"] for r in rows) / count,
        "tokens_per_instance": sum(r["tokens"] for r in rows) / count,
        "outcomes": dict(sorted(Counter(r["outcome"] for r in rows).items())),
    }


def _partition(
    instances: Mapping[str, Mapping[str, Any]],
    resolved: Mapping[str, tuple[set[str], set[str] | None]],
) -> dict[str, Any]:
    if "retrieved" not in resolved or "oracle" not in resolved:
        return {"partition": None, "excluded": []}
    cells: dict[str, list[str]] = {name: [] for name, _, _ in VERDICTS}
    excluded = []
    for iid, per_arm in instances.items():
        if "retrieved" not in per_arm or "oracle" not in per_arm:
            continue
        if SKIPPED in (per_arm["retrieved"]["outcome"], per_arm["oracle"]["outcome"]):
            excluded.append(iid)
            continue
        key = (per_arm["oracle"]["resolved"], per_arm["retrieved"]["resolved"])
        name = next(n for n, oracle, retrieved in VERDICTS if (oracle, retrieved) == key)
        cells[name].append(iid)
    return {"partition": cells, "excluded": excluded}


def load_report(path: Path) -> dict[str, Any]:
    """An e2e report written by ``ctx04 e2e report``."""
    try:
        data = json.loads(read_text(path, ReportError))
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}: not JSON ({err})") from err
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA or not isinstance(
        data.get("instances"), dict
    ):
        raise ReportError(f"{path}: not a {REPORT_SCHEMA} report (ctx04 e2e report writes one)")
    return data


def with_e2e(
    records: Sequence[dict[str, Any]], report: Mapping[str, Any], arm: str
) -> list[dict[str, Any]]:
    """Eval records given the arm's end-to-end figures per instance: ``resolved`` (1 or
    0), ``cost`` and ``e2e_tokens``, each None where the report does not measure it."""
    out = []
    for record in records:
        found = report["instances"].get(record["instance_id"], {}).get(arm)
        resolved = None if found is None else found.get("resolved")
        out.append({
            **record,
            "resolved": None if resolved is None else float(bool(resolved)),
            "cost": None if found is None else found.get("cost"),
            "e2e_tokens": None if found is None else found.get("tokens"),
        })
    return out


def _ids(value: object) -> set[str] | None:
    """The ids of a list of instance ids, None when ``value`` is not one."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return set(value)
    return None
