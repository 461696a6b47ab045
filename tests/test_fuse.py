"""Fusing the plugins' signals: Σ add · Π (1 + w·v), named weights, the top-k."""

from __future__ import annotations

import pytest

from ctx04_core.settings import Settings
from ctx04_core.stages.fuse import SignalError, fuse
from ctx04_core.types import Candidate, Signal, Span

A, B, C = (
    Candidate(Span(p, 1, 2), "function", f"{p}.f", ("test",)) for p in ("a.py", "b.py", "c.py")
)


def test_adds_then_scales() -> None:
    signals = [
        Signal("bm25", (1.0, 2.0, 0.0), 1.0),
        Signal("named", (0.5, 0.0, 1.0), 2.0),
        Signal("pointed", (0.0, 1.0, 1.0), 3.0, "scale"),
        Signal("tests", (1.0, 0.0, 0.0), -0.5, "scale"),
    ]
    ranked = fuse((A, B, C), signals, Settings())
    # a: (1 + 1) * 0.5 = 1; b: 2 * 4 = 8; c: 2 * 4 = 8, tie broken by path.
    assert [(r.candidate, r.rank, r.score) for r in ranked] == [
        (B, 1, 8.0), (C, 2, 8.0), (A, 3, 1.0),
    ]
    assert ranked[2].signals == (("bm25", 1.0), ("named", 0.5), ("pointed", 0.0), ("tests", 1.0))


def test_a_setting_overrides_a_weight_by_name() -> None:
    signals = [Signal("bm25", (1.0, 2.0, 0.0), 1.0), Signal("pin", (1.0, 0.0, 0.0), 1.0, "scale")]
    assert [r.candidate for r in fuse((A, B, C), signals, Settings())] == [A, B, C]
    off = Settings(signal_weights=("pin=0",))
    assert [(r.candidate, r.score) for r in fuse((A, B, C), signals, off)] == [
        (B, 2.0), (A, 1.0), (C, 0.0),
    ]


def test_order_of_plugins_does_not_matter() -> None:
    signals = [Signal("x", (0.1, 0.7, 0.3), 0.3), Signal("y", (0.2, 0.6, 0.9), 0.7, "scale"),
               Signal("z", (0.3, 0.3, 0.3), 0.11)]
    forward = fuse((A, B, C), signals, Settings())
    backward = fuse((A, B, C), signals[::-1], Settings())
    assert forward == backward


def test_no_signal_keeps_the_merged_order_and_top_k() -> None:
    ranked = fuse((C, A, B), [], Settings(top_k=2))
    assert [(r.candidate, r.rank, r.score, r.signals) for r in ranked] == [
        (C, 1, 0.0, ()), (A, 2, 0.0, ()),
    ]


@pytest.mark.parametrize(("signals", "message"), [
    ([Signal("s", (1.0,), 1.0)], "signal 's' has 1 values for 3 candidates"),
    ([Signal("s", (1.0,) * 3, 1.0), Signal("s", (0.0,) * 3, 1.0)],
     "two plugins return a signal named 's'"),
    ([Signal("s", (1.0,) * 3, 1.0, "max")], "signal 's' has mode 'max', not add or scale"),
], ids=["length", "twice", "mode"])
def test_a_malformed_signal_is_a_clear_error(signals: list[Signal], message: str) -> None:
    with pytest.raises(SignalError) as caught:
        fuse((A, B, C), signals, Settings())
    assert str(caught.value) == message


@pytest.mark.parametrize("entry", ["pin", "pin=high", "=1"])
def test_a_malformed_weight_setting_is_refused(entry: str) -> None:
    with pytest.raises(ValueError) as caught:
        Settings().with_assignments([f"signal_weights={entry}"])
    assert str(caught.value) == f"signal_weights takes NAME=NUMBER entries, not {entry!r}"
