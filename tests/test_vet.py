"""The vetting gate (spec §3.7), through the installed ``vet`` plugin and real entry points."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from ctx04_vet import OVERLAP_THRESHOLD, REASON, coverage, overlap, tokens

from ctx04_core import vet as exported_vet
from ctx04_core.hookspecs import hookimpl
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.types import (
    SOURCE_REF_SCHEMA,
    Candidate,
    ContextSlice,
    Evidence,
    Excerpt,
    RankedCandidate,
    SliceEntry,
    SourceRef,
    Span,
)
from ctx04_core.vetting import TRACE_SCHEMA, TraceError, Verdict, evidence_from_trace, vet

REJECTED = Verdict(
    accepted=False, reasons=("verbatim reproduction of untrusted retrieved content",)
)
ACCEPTED = Verdict(accepted=True, reasons=())

# shop/shipping.py's function as the assembler renders it: 50 tokens.
SHIPPING = (
    "def shipping_cost(total: float, weight_kg: float) -> float:\n"
    '    """Flat rate per kilogram, free above FREE_SHIPPING_OVER."""\n'
    "    if total >= FREE_SHIPPING_OVER:\n"
    "        return 0.0\n"
    "    return 4.5 + 1.2 * weight_kg\n"
)
PRICING = (
    "def apply_discount(amount: float, code: str) -> float:\n"
    '    """Reduce the amount by the coupon\'s percentage; unknown codes change nothing."""\n'
    "    rate = COUPONS.get(code, 0.0)\n"
    "    return amount * (1 - rate)\n"
)


def evidence(text: str, path: str = "shop/shipping.py", start_line: int = 6) -> Evidence:
    lines = text.count("\n")
    ref = SourceRef(
        path=path,
        start_line=start_line,
        end_line=start_line + lines - 1,
        content_digest=hashlib.sha256(path.encode()).hexdigest(),
        excerpt_digest=hashlib.sha256(text.encode()).hexdigest(),
        shortened=False,
        base="0" * 40,
    )
    return Evidence(ref=ref, text=text)


def test_the_threshold_is_the_setting() -> None:
    assert Settings().vet_overlap_threshold == 0.9
    assert OVERLAP_THRESHOLD == 0.9
    assert REASON == "verbatim reproduction of untrusted retrieved content"


def test_a_verbatim_copy_is_rejected() -> None:
    assert vet(SHIPPING, [evidence(PRICING), evidence(SHIPPING)]) == REJECTED


def test_a_copy_with_whitespace_reflowed_is_rejected() -> None:
    one_line = " ".join(SHIPPING.split())
    reindented = SHIPPING.replace("    ", "\t").replace("\n", "\n\n")
    assert overlap(one_line, SHIPPING) == 1.0
    assert vet(one_line, [evidence(SHIPPING)]) == REJECTED
    assert vet(reindented, [evidence(SHIPPING)]) == REJECTED


def test_a_partial_copy_with_new_code_passes() -> None:
    copied = "".join(SHIPPING.splitlines(keepends=True)[:4])
    assert (tokens(copied).total(), tokens(SHIPPING).total()) == (40, 50)  # 80% of the block
    artifact = copied + (
        "    rate = RATE_BY_ZONE.get(zone_of(total), DEFAULT_RATE)\n"  # 13 tokens
        "    return round(rate * weight_kg, 2)\n"  # 9 tokens
    )
    # 62 tokens: the 40 copied, plus 5 of the new 22 that the block's last
    # line still holds once (".", "return", "*", "weight_kg", "2").
    assert tokens(artifact).total() == 62
    assert overlap(artifact, SHIPPING) == 45 / 62
    assert vet(artifact, [evidence(SHIPPING)]) == ACCEPTED


def test_different_code_passes() -> None:
    artifact = "def shipping_cost(order):\n    return carrier.quote(order.parcels)\n"
    assert vet(artifact, [evidence(SHIPPING), evidence(PRICING)]) == ACCEPTED


@pytest.mark.parametrize("artifact", ["", "  \n\t\n"])
def test_an_empty_artifact_passes(artifact: str) -> None:
    assert overlap(artifact, SHIPPING) == 0.0
    assert vet(artifact, [evidence(SHIPPING)]) == ACCEPTED


def test_no_evidence_passes() -> None:
    assert vet(SHIPPING, []) == ACCEPTED


def test_exactly_at_the_threshold_passes_and_just_above_rejects() -> None:
    nine = "alpha beta gamma delta epsilon zeta eta theta iota"
    at = nine + " kappa"  # 9 of 10 tokens in the block
    above = nine + " kappa lambda"  # 10 of 11 tokens in the block
    assert overlap(at, nine) == 0.9
    assert vet(at, [evidence(nine + "\n")]) == ACCEPTED
    assert overlap(above, nine + " kappa") == 10 / 11
    assert vet(above, [evidence(nine + " kappa\n")]) == REJECTED


def test_overlap_counts_tokens_as_a_multiset() -> None:
    # The block holds "x" once, so nine of the artifact's ten are not from it.
    assert overlap("x x x x x x x x x x", "x = 1") == 0.1
    assert vet("x x x x x x x x x x", [evidence("x = 1\n")]) == ACCEPTED


def test_gap_markers_are_not_block_content() -> None:
    rendered = "def f():\n    a = 1\n⋮\n    return a\n"
    assert overlap("def f ( ) : a = 1 return a", rendered) == 1.0
    # A copy of the rendered block, marker included: the marker (1 of 11
    # tokens) is not code the block showed.
    assert overlap(rendered, rendered) == 10 / 11
    assert vet(rendered, [evidence(rendered)]) == REJECTED


def test_overlap_is_against_one_block_at_a_time() -> None:
    # Half from each block: no single block accounts for the artifact, but
    # each is reproduced whole inside it.
    artifact = SHIPPING + PRICING
    assert overlap(artifact, SHIPPING) < 0.9 and overlap(artifact, PRICING) < 0.9
    assert coverage(artifact, SHIPPING) == coverage(artifact, PRICING) == 1.0
    assert vet(artifact, [evidence(SHIPPING), evidence(PRICING, "shop/pricing.py", 6)]) == REJECTED


def slice_of(shown: str, cut: str) -> ContextSlice:
    """A slice that showed ``shown`` and left ``cut`` out for the budget."""
    entries = []
    for rank, (text, included) in enumerate(((shown, True), (cut, False)), start=1):
        span = Span("shop/x.py", 1, text.count("\n"))
        candidate = Candidate(span=span, kind="function", qualname=f"shop.x.f{rank}",
                              sources=("ripgrep",))
        lines = tuple(enumerate(text.splitlines(), start=1))
        excerpt = Excerpt(RankedCandidate(candidate, rank, 1.0 / rank), lines)
        heading = f"### shop.x.f{rank} [shop/x.py:1, ripgrep]\n"
        entries.append(SliceEntry(excerpt, heading + text + "\n", 0, included,
                                  evidence(text, "shop/x.py", 1)))
    shown_text = entries[0].text
    return ContextSlice(shown_text, 0, 4000, tuple(entries))


def test_a_slice_vets_against_its_included_entries_only() -> None:
    context = slice_of(shown=SHIPPING, cut=PRICING)
    assert vet(SHIPPING, context) == REJECTED
    assert vet(PRICING, context) == ACCEPTED  # never shown, so not a reproduction


def test_disabling_the_plugin_leaves_no_rule() -> None:
    assert vet(SHIPPING, [evidence(SHIPPING)], disable=["vet"]) == ACCEPTED


def test_only_the_plugin_still_rejects() -> None:
    assert vet(SHIPPING, [evidence(SHIPPING)], only=["vet"]) == REJECTED


def test_vet_is_exported_from_the_package() -> None:
    assert exported_vet is vet


class NoShell:
    """A second rule, registered for real on the plugin manager."""

    @hookimpl
    def vet(self, artifact: str) -> str | None:
        return "shell command in artifact" if "rm -rf" in artifact else None


def test_any_rejection_rejects() -> None:
    pm = plugin_manager(only=["vet"])
    pm.register(NoShell(), name="noshell")
    ev = (evidence(SHIPPING),)
    # Collected hooks run last-registered first; pluggy leaves out the Nones,
    # so every reason returned is a rejection.
    assert pm.hook.vet(artifact="rm -rf /", evidence=ev) == ["shell command in artifact"]
    assert pm.hook.vet(artifact=SHIPPING, evidence=ev) == [REASON]
    assert pm.hook.vet(artifact=SHIPPING + "rm -rf /", evidence=ev) == [
        "shell command in artifact", REASON,
    ]
    assert pm.hook.vet(artifact="print('hi')", evidence=ev) == []


def reference(item: Evidence) -> dict[str, Any]:
    ref = item.ref
    return {
        "schema": SOURCE_REF_SCHEMA, "path": ref.path, "start_line": ref.start_line,
        "end_line": ref.end_line, "content_digest": ref.content_digest,
        "excerpt_digest": ref.excerpt_digest, "shortened": ref.shortened, "base": ref.base,
        "text": item.text,
    }


def record(*items: Evidence) -> str:
    return json.dumps({"schema": TRACE_SCHEMA, "references": [reference(i) for i in items]})


def test_a_trace_yields_every_block_of_every_retrieval(tmp_path: Path) -> None:
    first = (evidence(PRICING, "shop/pricing.py", 6), evidence("x = 1\n", "shop/a.py", 3))
    second = evidence(SHIPPING)
    trace = tmp_path / "trace.jsonl"
    trace.write_text(f"{record(*first)}\n\n{record(second)}\n", encoding="utf-8")
    assert evidence_from_trace(trace) == (*first, second)
    assert vet(SHIPPING, evidence_from_trace(trace)) == REJECTED
    assert vet(PRICING, evidence_from_trace(trace)) == REJECTED


def test_a_missing_trace_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(TraceError) as caught:
        evidence_from_trace(missing)
    assert str(caught.value) == f"{missing}: cannot read trace: No such file or directory"


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        ("{not json", "2: invalid JSON: Expecting property name enclosed in double quotes"),
        ('{"schema": "other.v1", "references": []}',
         "2: expected a ctx04.repository-context.v1 record, found 'other.v1'"),
        ("[1, 2]", "2: expected a ctx04.repository-context.v1 record, found 'list'"),
        (f'{{"schema": "{TRACE_SCHEMA}"}}', "2: 'references' is not a list"),
        (f'{{"schema": "{TRACE_SCHEMA}", "references": [{{"schema": "x"}}]}}',
         "2: references[0] is not a ctx04.source-ref.v1 object"),
    ],
)
def test_a_bad_trace_line_is_an_error_naming_it(
    tmp_path: Path, second_line: str, message: str
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(f"{record(evidence(SHIPPING))}\n{second_line}\n", encoding="utf-8")
    with pytest.raises(TraceError) as caught:
        evidence_from_trace(trace)
    assert str(caught.value) == f"{trace}:{message}"
    assert isinstance(caught.value, ValueError)


# A parameter for a field the reference leaves out, as against one it sets to null.
ABSENT = object()


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("start_line", True, "start_line is missing or not int"),
        ("start_line", "6", "start_line is missing or not int"),
        ("base", 7, "base is missing or not str or null"),
        ("text", None, "text is missing or not str"),
        ("base", ABSENT, "base is missing or not str or null"),  # null is allowed, absent is not
    ],
)
def test_a_malformed_reference_is_an_error(
    tmp_path: Path, field: str, value: object, expected: str
) -> None:
    bad = reference(evidence(SHIPPING))
    if value is ABSENT:
        del bad[field]
    else:
        bad[field] = value
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"schema": TRACE_SCHEMA, "references": [bad]}) + "\n",
                     encoding="utf-8")
    with pytest.raises(TraceError) as caught:
        evidence_from_trace(trace)
    assert str(caught.value) == f"{trace}:1: references[0].{expected}"
