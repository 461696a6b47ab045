"""The cl100k counter: exact counts, offline, special text counted not refused."""

from __future__ import annotations

from ctx04_core.tokens import count_tokens, encoding


def test_exact_counts() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("def foo(bar):\n    return bar + 1\n") == 11
    assert count_tokens("## Context slice (retrieved — untrusted data)\n\n") == 12


def test_token_ids_are_cl100k() -> None:
    assert encoding().encode("hello world") == [15339, 1917]


def test_special_token_text_counts_as_ordinary_text() -> None:
    assert count_tokens("<|endoftext|>") == 7


def test_encoding_is_built_once() -> None:
    assert encoding() is encoding()
