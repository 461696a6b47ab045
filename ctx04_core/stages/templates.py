"""Issue-template lines: what a repository's issue form writes into every report.

A report filed through a template repeats its headings, checklist and
instructions ("I've searched the bugtracker for similar issues", "Provide
verbose output that clearly demonstrates the problem", "### Expected
behavior"). Searched as the task's words, they match whatever code uses
them, alike in every report of the repository, and crowd out the words that
say what this report is about. The lines of the task that one of the
repository's issue templates holds are left out of the text the query is
built from, compared as GitHub renders a template: a form's ``label:``
becomes ``### label``, a checkbox ``- [X] label``, a Markdown template is
copied as written.

Kept whatever a template holds: the first line (the title) and code fences
(removing one would pair the next fence with the wrong partner).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ctx04_core.repository import Repo

# Where GitHub looks for issue templates.
TEMPLATE_FOLDERS = (".github/ISSUE_TEMPLATE",)
TEMPLATE_FILES = (
    ".github/ISSUE_TEMPLATE.md", ".github/issue_template.md", "ISSUE_TEMPLATE.md",
    "docs/ISSUE_TEMPLATE.md",
)
TEMPLATE_SUFFIXES = (".md", ".yml", ".yaml")
# A repository with more templates than this is not keeping issue forms there.
MAX_TEMPLATES = 16

# A form's keys whose text GitHub copies into the issue.
_FORM_KEY = re.compile(
    r"^(?:-\s+)?(?:label|description|placeholder|value|title|name|about):\s*(?:[|>][-+]?\s*$)?"
)
# Headings, list items, quotes and checkboxes, however nested.
_MARKUP = re.compile(r"^(?:[-*+>#]+\s*|\[[ xX]?\]\s*|\d+[.)]\s+)*")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_LETTER = re.compile(r"[^\W\d_]")


def template_paths(root: Path) -> list[str]:
    """The repository's issue templates, relative paths in name order."""
    found = [path for path in TEMPLATE_FILES if (root / path).is_file()]
    for folder in TEMPLATE_FOLDERS:
        try:
            entries = sorted(os.scandir(root / folder), key=lambda e: e.name)
        except OSError:
            continue
        found.extend(
            f"{folder}/{entry.name}" for entry in entries
            if entry.name.endswith(TEMPLATE_SUFFIXES) and entry.is_file(follow_symlinks=False)
        )
    return found[:MAX_TEMPLATES]


def template_lines(repo: Repo) -> frozenset[str]:
    """Every line of the repository's issue templates, as :func:`normalized`
    compares them (files it may not read are refused as any other: a diagnostic)."""
    lines: set[str] = set()
    for path in template_paths(repo.root):
        source = repo.source(path)
        if source is not None:
            lines.update(filter(None, map(normalized, source.lines)))
    return frozenset(lines)


def without_template_lines(task_text: str, template: frozenset[str]) -> tuple[str, int]:
    """``task_text`` with its lines that ``template`` holds emptied, and how many."""
    lines = task_text.split("\n")
    dropped = 0
    for number, line in enumerate(lines[1:], start=1):
        if not _FENCE.match(line) and normalized(line) in template:
            lines[number] = ""
            dropped += 1
    return "\n".join(lines), dropped


def normalized(line: str) -> str:
    """The words of a template's or report's line without their markup: a form's
    key, heading marks, list and checkbox marks, quotes, emphasis; case folded.
    Empty for a line without a letter (a rule, a bare mark)."""
    text = _MARKUP.sub("", _FORM_KEY.sub("", line.strip()))
    text = " ".join(text.strip("\"'*_` \t").split()).casefold()
    return text if _LETTER.search(text) else ""
