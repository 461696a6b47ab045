"""Splitting code and prose into the terms every scorer in ctx04 compares.

One tokenizer serves the re-rank, the line prune and the description index,
so a term means the same thing at every stage.
"""

from __future__ import annotations

import re

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
# Boundaries inside an identifier: snake_case, camelCase, HTTPServer, v2Beta.
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased terms: each identifier whole, then its parts if it has several.

    ``select_related`` gives ``select_related, select, related`` so a task that
    names the identifier matches it exactly and prose that says "related"
    still matches a part.
    """
    terms: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group()
        terms.append(word.lower())
        parts = _PART.findall(word)
        if len(parts) > 1:
            terms.extend(part.lower() for part in parts)
    return terms
