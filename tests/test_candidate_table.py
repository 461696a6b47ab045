"""The candidate table as a terminal of 80 and of 200 columns shows it, line for line."""

# The expected 200-column lines are longer than the line limit, as they must be.
# ruff: noqa: E501

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ctx04_core.candidate_table import candidate_table, shorten_left
from ctx04_core.types import (
    Candidate,
    Evidence,
    Excerpt,
    RankedCandidate,
    SliceEntry,
    SourceRef,
    Span,
)

# (path, lines, qualname, sources, score, tokens of its excerpt or None when not offered, shown)
ROWS = [
    ("django/db/models/sql/compiler.py", (1200, 1260),
     "django.db.models.sql.compiler.SQLCompiler.get_related_selections",
     ("ripgrep", "apidesc", "bm25"), 12.5, 812, True),
    ("django/db/models/query.py", (1500, 1530), "django.db.models.query.QuerySet.select_related",
     ("ripgrep",), 9.25, 300, True),
    ("tests/select_related_onetoone/tests.py", (10, 20),
     "tests.select_related_onetoone.tests.ReverseSelectRelatedTestCase.test_basic",
     ("bm25", "members"), 3.0, 150, False),
    ("docs/ref/models/querysets.txt", (900, 920), None, ("ripgrep",), 1.0, None, False),
]


def table_lines(width: int) -> list[str]:
    candidates, entries = [], []
    for rank, (path, (start, end), qualname, sources, score, tokens, shown) in enumerate(ROWS, 1):
        kind = "lines" if qualname is None else "function"
        ranked = RankedCandidate(
            Candidate(Span(path, start, end), kind, qualname, sources), rank, score
        )
        candidates.append(ranked)
        if tokens is not None:
            ref = SourceRef(path, start, end, "c" * 64, "e" * 64, False, None)
            entries.append(SliceEntry(Excerpt(ranked, ()), "", tokens, shown, Evidence(ref, "")))
    output = io.StringIO()
    console = Console(file=output, width=width, color_system=None, legacy_windows=False)
    console.print(candidate_table(candidates, entries, width))
    return [line.rstrip() for line in output.getvalue().splitlines()]


# A terminal of 80 columns: no sources or tokens, each path and name on one
# line, shortened from the left at a "/" or "." so no name is cut.
AT_80 = [
    'ctx04: 4 ranked candidates',
    '┏━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━┓',
    '┃ # ┃ path:lines                 ┃ qualname                   ┃  score ┃ shown ┃',
    '┡━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━┩',
    '│ 1 │ …sql/compiler.py:1200-1260 │ ….get_related_selections   │ 12.500 │  yes  │',
    '│ 2 │ …models/query.py:1500-1530 │ ….QuerySet.select_related  │  9.250 │  yes  │',
    '│ 3 │ …/tests.py:10-20           │ ….test_basic               │  3.000 │  no   │',
    '│ 4 │ …/querysets.txt:900-920    │                            │  1.000 │  no   │',
    '└───┴────────────────────────────┴────────────────────────────┴────────┴───────┘',
]

# 200 columns: every column, nothing shortened.
AT_200 = [
    'ctx04: 4 ranked candidates',
    '┏━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━┓',
    '┃ rank ┃ path:lines                                   ┃ qualname                                                                    ┃ sources                ┃  score ┃ tokens ┃ included ┃',
    '┡━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━┩',
    '│    1 │ django/db/models/sql/compiler.py:1200-1260   │ django.db.models.sql.compiler.SQLCompiler.get_related_selections            │ ripgrep, apidesc, bm25 │ 12.500 │    812 │   yes    │',
    '│    2 │ django/db/models/query.py:1500-1530          │ django.db.models.query.QuerySet.select_related                              │ ripgrep                │  9.250 │    300 │   yes    │',
    '│    3 │ tests/select_related_onetoone/tests.py:10-20 │ tests.select_related_onetoone.tests.ReverseSelectRelatedTestCase.test_basic │ bm25, members          │  3.000 │    150 │    no    │',
    '│    4 │ docs/ref/models/querysets.txt:900-920        │                                                                             │ ripgrep                │  1.000 │      0 │    no    │',
    '└──────┴──────────────────────────────────────────────┴─────────────────────────────────────────────────────────────────────────────┴────────────────────────┴────────┴────────┴──────────┘',
]


@pytest.mark.parametrize(("width", "expected"), [(80, AT_80), (200, AT_200)])
def test_the_table_at_a_width(width: int, expected: list[str]) -> None:
    assert table_lines(width) == expected
    assert max(len(line) for line in expected) <= width


@pytest.mark.parametrize(
    ("text", "width", "separator", "shortened"),
    [
        ("django/db/models/query.py:10-20", 40, "/", "django/db/models/query.py:10-20"),
        ("django/db/models/query.py:10-20", 20, "/", "…/query.py:10-20"),
        # The cut falls just after a separator: the tail is whole names already.
        ("django/db/models/query.py:10-20", 22, "/", "…models/query.py:10-20"),
        ("django/db/models/query.py:10-20", 23, "/", "…/models/query.py:10-20"),
        ("a.QuerySet.select_related", 20, ".", "….select_related"),
        # A single name longer than the width can only be cut.
        ("a_very_long_file_name.py:1-2", 10, "/", "…me.py:1-2"),
    ],
)
def test_shorten_left(text: str, width: int, separator: str, shortened: str) -> None:
    assert shorten_left(text, width, separator) == shortened
    assert len(shortened) <= width
