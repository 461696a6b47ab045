"""The vetting rule (spec §3.7): no verbatim reproduction of retrieved content.

Retrieved code is untrusted data, never a template. An artifact a model
emits (an edit, a command, a proposed tool) is rejected with
:data:`REASON` when it reproduces any single retrieved block.

The measure, exactly:

* **Whitespace is normalized**: runs of whitespace count as one space and
  leading/trailing whitespace is ignored. The tokenizer below never puts
  whitespace inside a token, so tokenizing the raw text gives the same
  tokens as tokenizing the normalized text; reflowing or re-indenting a copy
  does not hide it.
* **Tokens** are ``re.findall(r"\\w+|[^\\w\\s]", text)``: each run of word
  characters, and each other non-space character on its own.
* **Gap markers are not code**: a block line that is just ``⋮`` (the
  marker the assembler puts where lines were pruned) is dropped before the
  block is tokenized.
* ``overlap(artifact, block)`` = size of the multiset intersection of the
  artifact's tokens and the block's tokens, divided by the number of the
  artifact's tokens: the share of the artifact that the block accounts for.
  An empty artifact (no tokens) has overlap 0.
* The artifact is rejected iff ``overlap > OVERLAP_THRESHOLD`` for at least
  one block; exactly at the threshold it passes.
"""

from __future__ import annotations

import re
from collections import Counter

from ctx04_core.evidence import GAP
from ctx04_core.hookspecs import hookimpl
from ctx04_core.settings import Settings
from ctx04_core.types import Evidence

REASON = "verbatim reproduction of untrusted retrieved content"
# The hook has no settings argument, so the threshold is read once from the
# setting's default: Settings stays the one place the number is defined.
OVERLAP_THRESHOLD = Settings().vet_overlap_threshold

TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> Counter[str]:
    """The multiset of tokens in ``text``."""
    return Counter(TOKEN.findall(text))


def block_tokens(block: str) -> Counter[str]:
    """The tokens of a rendered block, its gap-marker lines left out."""
    return tokens("\n".join(line for line in block.splitlines() if line.strip() != GAP))


def overlap(artifact: str, block: str) -> float:
    """The share of the artifact's tokens that the block also holds (multiset)."""
    mine = tokens(artifact)
    total = mine.total()
    if total == 0:
        return 0.0
    return (mine & block_tokens(block)).total() / total


@hookimpl
def vet(artifact: str, evidence: tuple[Evidence, ...]) -> str | None:
    if any(overlap(artifact, item.text) > OVERLAP_THRESHOLD for item in evidence):
        return REASON
    return None
