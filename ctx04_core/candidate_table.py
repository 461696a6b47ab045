"""The ranked candidates as a terminal table that reads at any width.

Rich folds a long cell over several lines, which at 80 columns turned every
row into four to six lines of path and name fragments. Here each row stays
one line: a path or qualified name that does not fit is shortened from the
left (where the shared, least telling part is) at a ``/`` or ``.``, so the
file and the definition keep their names, and a narrow terminal drops the
columns a reader can do without (sources, tokens).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from ctx04_core.types import RankedCandidate, SliceEntry

# Below this many columns the sources and tokens columns are left out.
WIDE_FROM = 120
NARROW_HEADERS = {"rank": "#", "included": "shown"}
JUSTIFY: dict[str, JustifyMethod] = {
    "rank": "right", "score": "right", "tokens": "right", "included": "center",
}
ELLIPSIS = "…"


def shorten_left(text: str, width: int, separator: str) -> str:
    """``text`` in at most ``width`` characters: its tail after an ellipsis,
    cut at a ``separator`` when the tail holds one, so no name is cut."""
    if len(text) <= width:
        return text
    start = len(text) - (width - 1)
    tail = text[start:]
    cut = tail.find(separator)
    if text[start - 1] != separator and 0 <= cut < len(tail) - 1:
        tail = tail[cut:]
    return ELLIPSIS + tail


def _split(
    available: int, path_need: int, path_least: int, name_need: int
) -> tuple[int, int]:
    """Widths for the path and name columns: each its need when both fit; else
    half each, the path never less than ``path_least`` (the file names whole),
    and what one column does not need goes to the other."""
    if path_need + name_need <= available:
        return path_need, name_need
    path = min(path_need, max(path_least, available // 2))
    if available - path > name_need:
        path = available - name_need
    return path, available - path


def candidate_table(
    candidates: Sequence[RankedCandidate], entries: Sequence[SliceEntry], width: int
) -> Table:
    """One line per ranked candidate, fitted to ``width`` columns; ``entries`` are
    the slice's, which say what each candidate cost and whether it was shown."""
    wide = width >= WIDE_FROM
    shown = {e.excerpt.ranked.rank: e for e in entries}
    rows = []
    for ranked in candidates:
        c = ranked.candidate
        entry = shown.get(ranked.rank)
        rows.append({
            "rank": str(ranked.rank),
            "path:lines": f"{c.span.path}:{c.span.start_line}-{c.span.end_line}",
            "qualname": c.qualname or "",
            "sources": ", ".join(c.sources),
            "score": f"{ranked.score:.3f}",
            "tokens": str(entry.tokens) if entry else "0",
            "included": "yes" if entry and entry.included else "no",
        })
    columns = ["rank", "path:lines", "qualname", "score", "included"]
    if wide:
        columns[3:3] = ["sources"]
        columns[-1:-1] = ["tokens"]
    headers = {c: c for c in columns} if wide else {**{c: c for c in columns}, **NARROW_HEADERS}

    def need(column: str) -> int:
        return max([len(headers[column]), *(len(row[column]) for row in rows)])

    fixed = sum(need(c) for c in columns if c not in ("path:lines", "qualname"))
    # Each column has a space either side and a rule after it, plus the first rule.
    available = width - fixed - 3 * len(columns) - 1
    # The file name and lines of every path, after "…/".
    path_least = min(
        max([0, *(len(row["path:lines"].rsplit("/", 1)[-1]) + 2 for row in rows)]),
        available * 3 // 5,
    )
    path_width, name_width = _split(
        max(available, 4), need("path:lines"), path_least, need("qualname")
    )
    table = Table(title=f"ctx04: {len(candidates)} ranked candidates",
                  title_justify="left")
    for column in columns:
        fitted = {"path:lines": path_width, "qualname": name_width}.get(column, need(column))
        justify = JUSTIFY.get(column, "left")
        table.add_column(headers[column], justify=justify, no_wrap=True, min_width=fitted,
                         max_width=fitted)
    for row in rows:
        row["path:lines"] = shorten_left(row["path:lines"], path_width, "/")
        row["qualname"] = shorten_left(row["qualname"], name_width, ".")
        # Text, not markup: a path may hold brackets ("pages/[id].tsx").
        table.add_row(*(
            Text(row[c], style="green" if c == "included" and row[c] == "yes" else "")
            for c in columns
        ))
    return table
