"""What parsing one file may cost, the same for every parser plugin.

A deeply nested file (20,000 nested blocks) took a tree-sitter parser
minutes: the tree is parsed quickly, but walking it costs its depth at
every step. A parser gives up on a file nested deeper than
``Settings.parse_max_depth``, as CPython refuses 200 nested brackets, or
still being parsed at ``Settings.parse_deadline_s`` (pathological input no
depth bounds); the index records the file ``too_complex`` with the reason,
keeps no nodes of it and still searches it as lines.
"""

from __future__ import annotations

import time

from ctx04_core.settings import Settings


class TooComplex(SyntaxError):
    """Parsing the file would cost more than its budget; the message is the one-line reason.

    A kind of SyntaxError, as CPython's "too many nested parentheses" is: a
    caller that only needs to know the file did not parse treats both alike.
    """


class ParseBudget:
    """One file's parse: its deadline, started when the budget is made, and its depth limit."""

    def __init__(self, settings: Settings) -> None:
        self.seconds = settings.parse_deadline_s
        self.max_depth = settings.parse_max_depth
        self._deadline = time.monotonic() + self.seconds

    def expired(self) -> bool:
        return time.monotonic() >= self._deadline

    def check(self) -> None:
        """Raise TooComplex once the deadline has passed."""
        if self.expired():
            raise TooComplex(f"not parsed within the {self.seconds:g} s parse deadline")

    def too_deep(self, line: int) -> TooComplex:
        """The error of a file nested deeper than ``max_depth``, first at ``line``."""
        return TooComplex(f"nested deeper than {self.max_depth} levels at line {line}")
