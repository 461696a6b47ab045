"""What plugins compute during one retrieval, kept for its later passes.

The signals hook runs once over the recalled candidates and once more over
the pool that expansion grew, and most of what a signal reads does not
depend on the pool: a candidate's tokenised text, its call-graph neighbours,
the task's term weights. A :class:`RetrievalMemo` lives for one retrieval
(it cannot outlive a refresh of the index it was filled from) and is handed
to every pass, so each plugin computes such a value once.

Each plugin keeps its values under its own name: one plugin never reads
another's, as no stage reaches into another.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

T = TypeVar("T")


class RetrievalMemo:
    """Values by (owner, key), each computed at most once per retrieval."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, Hashable], Any] = {}

    def get(self, owner: str, key: Hashable, compute: Callable[[], T]) -> T:
        """The value ``owner`` kept under ``key``, computed now if it has none.

        The key must name everything the value depends on that can differ
        within one retrieval (a candidate's span, not the pool it is in).
        """
        slot = (owner, key)
        if slot not in self._values:
            self._values[slot] = compute()
        return cast(T, self._values[slot])
