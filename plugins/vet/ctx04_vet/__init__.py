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
* **Gap markers are not code**: a line that is just ``⋮`` (the marker the
  assembler puts where lines were pruned) is dropped before a block, or the
  authored text below, is tokenized.
* ``overlap(artifact, block)`` = size of the multiset intersection of the
  artifact's tokens and the block's tokens, divided by the number of the
  artifact's tokens: the share of the artifact that the block accounts for
  (a bare copy). An empty artifact (no tokens) has overlap 0.
* ``coverage(artifact, block)`` = the longest run of the block's tokens that
  the artifact's authored text holds contiguously, in the same order,
  divided by the number of the block's tokens: the share of the block
  reproduced whatever surrounds it (the rendered block under its heading,
  a copy wrapped in other text). Only a block of at least
  ``MIN_BLOCK_TOKENS`` tokens is judged so: a signature alone is what an
  override or an edit of that function restates.
* The **authored text** is the artifact less what a unified diff only
  quotes: each hunk (``@@ -a,b +c,d @@``, read for exactly its b old and d
  new lines) keeps its added lines, without their ``+``, and drops its
  header, context and removed lines, which name code already in the
  repository. Text outside hunks is kept as written.
* The artifact is rejected iff, for at least one block, ``overlap`` or
  ``coverage`` is over ``OVERLAP_THRESHOLD``; exactly at it, it passes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate

from ctx04_core.diff import hunk_header
from ctx04_core.evidence import GAP
from ctx04_core.hookspecs import hookimpl
from ctx04_core.settings import Settings
from ctx04_core.types import Evidence

REASON = "verbatim reproduction of untrusted retrieved content"
# The hook has no settings argument, so the numbers are read once from the
# settings' defaults: Settings stays the one place they are defined.
OVERLAP_THRESHOLD = Settings().vet_overlap_threshold
MIN_BLOCK_TOKENS = Settings().vet_min_block_tokens

TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> Counter[str]:
    """The multiset of tokens in ``text``."""
    return Counter(each_token(text))


def each_token(text: str) -> Iterator[str]:
    """The tokens of ``text`` one by one: ``findall`` would hold the GIL for
    the whole of a large artifact, and the MCP server's other calls with it."""
    return (match.group() for match in TOKEN.finditer(text))


def without_gaps(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.strip() != GAP)


def authored(artifact: str) -> str:
    """The artifact's own text: a unified diff's hunks reduced to their added lines."""
    kept: list[str] = []
    old = new = 0  # lines the current hunk still has on each side
    for line in artifact.splitlines():
        if old or new:
            marker = line[:1]
            if marker == "+" and new:
                kept.append(line[1:])
                new -= 1
                continue
            if marker == "-" and old:
                old -= 1
                continue
            if marker == " " and old and new:
                old, new = old - 1, new - 1
                continue
            old = new = 0  # the counts were wrong: the rest is read as written
        hunk = hunk_header(line)
        if hunk:
            old, new = hunk.old_count, hunk.new_count
            continue
        kept.append(line)
    return without_gaps("\n".join(kept))


def spaced(text: str) -> str:
    """The text's tokens joined by single spaces, with a space at each end.

    Tokens hold no whitespace, so a run of tokens is contiguous in a text
    exactly when its spaced form is a substring of the text's spaced form.
    """
    return f" {' '.join(each_token(text))} "


@dataclass(frozen=True)
class Artifact:
    """An artifact tokenized once, then measured against each block."""

    counts: Counter[str]
    total: int
    authored: str  # spaced(authored(artifact))

    @classmethod
    def of(cls, text: str) -> Artifact:
        counts = tokens(text)
        return cls(counts, counts.total(), spaced(authored(text)))

    def overlap(self, block: Counter[str]) -> float:
        if self.total == 0:
            return 0.0
        shared = sum(min(count, self.counts[token]) for token, count in block.items())
        return shared / self.total

    def holds_run(self, block: list[str], length: int) -> bool:
        """Whether some ``length`` contiguous tokens of ``block`` are contiguous here too.

        Any such run holds one of the anchors (runs of ``k`` tokens starting
        every ``length - k + 1`` tokens), so only where an anchor occurs is
        the run measured, extended on both sides as far as the two agree.
        An anchor that recurs more often than the block has windows of
        ``length`` tokens (a table of zeros, in an artifact full of them)
        would cost more than looking for each window whole, a substring
        search linear in the artifact: then that is done instead.
        """
        windows = len(block) - length + 1
        examined = 0
        k = (length + 1) // 2
        stride = length - k + 1
        for start in range(0, len(block) - k + 1, stride):
            anchor = f" {' '.join(block[start:start + k])} "
            at = self.authored.find(anchor)
            while at >= 0:
                examined += 1
                if examined > windows:
                    return self._holds_window(block, length)
                before = self._extend(block[:start][::-1], at, backwards=True)
                after = self._extend(block[start + k:], at + len(anchor), backwards=False)
                if before + k + after >= length:
                    return True
                at = self.authored.find(anchor, at + 1)
        return False

    def _holds_window(self, block: list[str], length: int) -> bool:
        text = spaced(" ".join(block))
        # starts[i]: where the space before token i is in ``text``.
        starts = list(accumulate((len(token) + 1 for token in block), initial=0))
        return any(
            text[starts[first]:starts[first + length] + 1] in self.authored
            for first in range(len(block) - length + 1)
        )

    def _extend(self, following: list[str], at: int, *, backwards: bool) -> int:
        """How many of ``following`` (nearest first) continue the run at ``at``."""

        def continues(count: int) -> bool:
            if backwards:
                piece = f" {' '.join(reversed(following[:count]))}"
                return self.authored[at - len(piece):at] == piece
            piece = f"{' '.join(following[:count])} "
            return self.authored[at:at + len(piece)] == piece

        return largest(continues, len(following))


def largest(holds: Callable[[int], bool], most: int) -> int:
    """The largest n <= ``most`` for which ``holds(n)``, when it holds for every smaller n."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


def coverage(artifact: str, block: str) -> float:
    """The share of the block's tokens in its longest run held by the artifact."""
    shown = TOKEN.findall(without_gaps(block))
    if not shown:
        return 0.0
    prepared = Artifact.of(artifact)
    return largest(lambda length: prepared.holds_run(shown, length), len(shown)) / len(shown)


def overlap(artifact: str, block: str) -> float:
    """The share of the artifact's tokens that the block also holds (multiset)."""
    return Artifact.of(artifact).overlap(tokens(without_gaps(block)))


def reproduces(artifact: Artifact, block: str) -> bool:
    shown = TOKEN.findall(without_gaps(block))
    if artifact.overlap(Counter(shown)) > OVERLAP_THRESHOLD:
        return True
    return len(shown) >= MIN_BLOCK_TOKENS and artifact.holds_run(shown, run_needed(len(shown)))


def run_needed(size: int) -> int:
    """The shortest run whose share of ``size`` tokens is over the threshold.

    Found by the same division as :func:`coverage`, so float rounding of
    ``OVERLAP_THRESHOLD * size`` cannot move the boundary.
    """
    start = max(int(OVERLAP_THRESHOLD * size) - 1, 0)
    over = (run for run in range(start, size + 1) if run / size > OVERLAP_THRESHOLD)
    return next(over, size + 1)


@hookimpl
def vet(artifact: str, evidence: tuple[Evidence, ...]) -> str | None:
    prepared = Artifact.of(artifact)
    if any(reproduces(prepared, item.text) for item in evidence):
        return REASON
    return None
