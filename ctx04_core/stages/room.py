"""What is left of the slice's budgets as its excerpts are planned."""

from __future__ import annotations

import functools

from ctx04_core.evidence import HEADER, KINDS, short_coverage
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.assemble import render, utf8_bytes
from ctx04_core.tokens import count_tokens
from ctx04_core.types import Diagnostic, Excerpt


class Room:
    """What is left of the slice's budgets as excerpts are planned into it.

    Each excerpt is measured as assemble renders it (heading and quoted
    lines), with a token more for its join to the next; the header and the
    longest short coverage line are set aside first. So assemble, which keeps
    a prefix, never has to cut a planned entry.
    """

    def __init__(self, repo: Repo, settings: Settings) -> None:
        closing = HEADER + _longest_short_coverage()
        self.repo = repo
        self.settings = settings
        self.left: dict[str, int | None] = {
            "tokens": settings.budget_tokens - count_tokens(closing),
            "bytes": settings.max_block_bytes - utf8_bytes(closing),
            "heading_bytes": settings.max_reference_bytes,
            "quoted_lines": settings.max_quoted_lines,
            "quoted_bytes": settings.max_quoted_bytes,
        }

    def cost(self, excerpt: Excerpt) -> dict[str, int]:
        entry = render(excerpt, self.repo, self.settings)
        return {
            "tokens": count_tokens(entry.text) + 1, "bytes": utf8_bytes(entry.text),
            "heading_bytes": utf8_bytes(entry.heading), "quoted_lines": entry.quoted_lines,
            "quoted_bytes": utf8_bytes(entry.quoted),
        }

    def take(self, excerpt: Excerpt) -> bool:
        """Plan ``excerpt`` in when it fits what is left; False when it does not."""
        return self._spend(self.cost(excerpt))

    def replace(self, planned: Excerpt, larger: Excerpt) -> bool:
        """Plan ``larger`` instead of ``planned`` when the difference fits; False when not."""
        return self._spend(self._difference(planned, larger))

    def fits(self, planned: Excerpt, larger: Excerpt) -> bool:
        """Whether ``larger`` would fit instead of ``planned``; nothing is planned."""
        return self._within(self._difference(planned, larger))

    def _difference(self, planned: Excerpt, larger: Excerpt) -> dict[str, int]:
        old, new = self.cost(planned), self.cost(larger)
        return {name: new[name] - old[name] for name in new}

    def _within(self, cost: dict[str, int]) -> bool:
        return all(left is None or cost[name] <= left for name, left in self.left.items())

    def _spend(self, cost: dict[str, int]) -> bool:
        if not self._within(cost):
            return False
        self.left = {
            name: None if left is None else left - cost[name] for name, left in self.left.items()
        }
        return True


@functools.cache
def _longest_short_coverage() -> str:
    """The longest closing line assemble sets aside room for, at 999 of each kind."""
    return short_coverage([Diagnostic(kind, "") for kind in KINDS for _ in range(999)])
