"""Reading a unified diff's hunk headers: the one parse the gold, the
history plugin and the vetting gate share.

A hunk header ``@@ -a,b +c,d @@ section`` says how many old (``b``) and new
(``d``) lines follow, 1 when the count is left out; a reader that skips
exactly that many lines cannot take a changed line for a header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)")


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str  # the function line git found for the hunk, after the second @@


def hunk_header(line: str) -> Hunk | None:
    """The hunk ``line`` opens, or None when it is no hunk header."""
    match = _HEADER.match(line)
    if match is None:
        return None
    old_start, old_count, new_start, new_count, section = match.groups()
    return Hunk(int(old_start), int(old_count or 1), int(new_start), int(new_count or 1),
                section)
