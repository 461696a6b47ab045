"""The trace record (``--trace``) and the vetting gate reading it, through the real command."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SHOP, make_git_repo

# The hostile corpus installs the process's one "open" audit hook; reuse it
# rather than add a second hook that could never be removed either.
from test_hostile_repository import opened_paths

from ctx04_core import retrieve
from ctx04_core.output import retrieval_json
from ctx04_core.settings import Settings
from ctx04_core.trace import append_trace, trace_record

CTX04 = str(Path(sys.executable).parent / "ctx04")
TASK = "Cart.total() rounds the discounted subtotal wrongly"
BUDGET = "300"  # small enough that some ranked candidates are left out
REJECTED = "rejected: verbatim reproduction of untrusted retrieved content\n"
RECORD_KEYS = ["schema", "repo", "query", "references", "diagnostics", "slice", "manifest",
               "settings"]
REFERENCE_KEYS = ["schema", "path", "start_line", "end_line", "content_digest",
                  "excerpt_digest", "shortened", "base", "text"]


def ctx04(*args: str) -> subprocess.CompletedProcess[str]:
    # os.environ carries the autouse fixture's temp cache folder.
    return subprocess.run([CTX04, *args], capture_output=True, text=True, check=False,
                          env=dict(os.environ))


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    # A file that is not UTF-8 and matches the task, so the record carries
    # an excluded diagnostic as well as omissions.
    files = {**SHOP, "shop/legacy.py": "def old_subtotal():\n    return 'café'\n".encode("latin-1")}
    return make_git_repo(tmp_path / "shop", files)


def head(root: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


def read_records(trace: Path) -> list[dict[str, Any]]:
    lines = trace.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_two_retrievals_append_two_records_of_what_was_rendered(
    shop: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "session.jsonl"
    as_json = ctx04("retrieve", TASK, "--repo", str(shop), "--budget", BUDGET,
                    "--trace", str(trace), "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    as_markdown = ctx04("retrieve", TASK, "--repo", str(shop), "--budget", BUDGET,
                        "--trace", str(trace), "--format", "markdown")
    assert as_markdown.returncode == 0, as_markdown.stderr

    records = read_records(trace)
    assert len(records) == 2
    document = json.loads(as_json.stdout)
    base = head(shop)
    for record in records:
        assert list(record) == RECORD_KEYS
        assert record["schema"] == "ctx04.repository-context.v1"
        assert record["repo"] == {"root": str(shop.resolve()), "base": base}
        assert record["query"] == document["query"]
        assert record["diagnostics"] == document["diagnostics"]["coverage"]
        assert record["settings"] == document["diagnostics"]["settings"]
        for reference in record["references"]:
            assert list(reference) == REFERENCE_KEYS
            assert reference["schema"] == "ctx04.source-ref.v1"
            assert reference["excerpt_digest"] == sha256(reference["text"])
            assert reference["content_digest"] == sha256((shop / reference["path"]).read_bytes())
            assert reference["base"] == base
    first, second = records

    # Only the rendered references: exactly the JSON output's, without the rank.
    rendered = [{k: v for k, v in r.items() if k != "rank"} for r in document["references"]]
    assert first["references"] == rendered
    # Every rendered text is in the slice as shown, and only those are.
    for reference in second["references"]:
        assert reference["text"] in as_markdown.stdout

    # The slice's digest is over exactly the markdown the model was shown.
    assert second["slice"] == {
        "digest": sha256(as_markdown.stdout),
        "tokens": document["tokens"],
        "bytes": len(as_markdown.stdout.encode()),
    }
    assert first["slice"] == second["slice"]  # the same retrieval, twice

    # The manifest lists every ranked candidate, shown or not.
    manifest = [{k: v for k, v in c.items() if k != "text"} for c in document["candidates"]]
    assert first["manifest"] == second["manifest"] == manifest
    assert [c["rank"] for c in manifest] == list(range(1, len(manifest) + 1))
    shown = [c["rank"] for c in manifest if c["included"]]
    assert shown == [r["rank"] for r in document["references"]]
    assert len(shown) < len(manifest)  # the budget left some out: they are not references
    # Each budget omission names a candidate of the manifest that was not shown
    # (a candidate prune found nothing in is not offered, so not omitted).
    left_out = {(c["path"], c["qualname"]) for c in manifest if not c["included"]}
    omitted = [(d["path"], d["detail"]) for d in first["diagnostics"] if d["kind"] == "omitted"]
    assert omitted and set(omitted) <= left_out
    assert first["diagnostics"][0] == {
        "kind": "excluded", "reason": "not valid UTF-8", "path": "shop/legacy.py", "detail": "",
    }


def test_the_record_is_written_without_reading_any_file_again(
    shop: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    result = retrieve(TASK, shop, settings=Settings(budget_tokens=int(BUDGET)))
    with opened_paths() as opened:
        append_trace(result, trace)
    assert opened == [str(trace)]
    (record,) = read_records(trace)
    assert record == json.loads(json.dumps(trace_record(result), ensure_ascii=False))
    # The manifest is the ranking itself, every candidate once, in rank order.
    assert [(m["rank"], m["path"], m["qualname"]) for m in record["manifest"]] == [
        (r.rank, r.candidate.span.path, r.candidate.qualname) for r in result.candidates
    ]
    assert record["references"] == [
        {k: v for k, v in r.items() if k != "rank"} for r in retrieval_json(result)["references"]
    ]


def test_vet_rejects_a_copy_of_a_rendered_block_and_passes_other_work(
    shop: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "session.jsonl"
    for _ in range(2):
        done = ctx04("retrieve", TASK, "--repo", str(shop), "--budget", BUDGET,
                     "--trace", str(trace), "--format", "markdown")
        assert done.returncode == 0, done.stderr
    records = read_records(trace)
    copied = tmp_path / "copied.py"
    copied.write_text(records[0]["references"][0]["text"], encoding="utf-8")
    unrelated = tmp_path / "unrelated.py"
    unrelated.write_text("def greet(name):\n    print(f'hello {name}')\n", encoding="utf-8")

    rejected = ctx04("vet", str(copied), "--trace", str(trace))
    assert (rejected.returncode, rejected.stdout, rejected.stderr) == (1, "", REJECTED)

    blocks = sum(len(r["references"]) for r in records)
    accepted = ctx04("vet", str(unrelated), "--trace", str(trace))
    assert (accepted.returncode, accepted.stderr) == (0, "")
    assert accepted.stdout == f"accepted: checked against {blocks} retrieved blocks\n"


def test_a_trace_that_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path) -> None:
    artifact = tmp_path / "artifact.py"
    artifact.write_text("x = 1\n", encoding="utf-8")
    missing = tmp_path / "no-such-trace.jsonl"
    done = ctx04("vet", str(artifact), "--trace", str(missing))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ctx04: error: {missing}: cannot read trace: No such file or directory\n"


def test_a_trace_that_cannot_be_written_is_one_line_and_exit_2(
    shop: Path, tmp_path: Path
) -> None:
    unwritable = tmp_path / "no-such-folder" / "trace.jsonl"
    done = ctx04("retrieve", TASK, "--repo", str(shop), "--trace", str(unwritable),
                 "--format", "markdown")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ctx04: error: cannot write the trace {unwritable}: No such file or directory\n"
    )
    assert not unwritable.parent.exists()
