"""Properties of the evidence rendering: the line cut, the digests, the caps.

Hypothesis draws the inputs; the caps are checked on the real assembler over
a real (small, indexed) repository, so every excerpt's lines and digests come
from files on disk.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

import pytest
from conftest import shared_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx04_core.evidence import GAP, HEADER, cut_line, sha256_hex
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.assemble import assemble
from ctx04_core.tokens import count_tokens
from ctx04_core.types import Candidate, Diagnostic, Excerpt, RankedCandidate, Span

# Text with many multi-byte and non-BMP characters, where a byte cut can split one.
WIDE = st.text(alphabet=st.sampled_from("ab _(é中😀\U0010fffd\n\t")) | st.text()


# --- the line cut -----------------------------------------------------------------------


@given(line=WIDE, limit=st.integers(1, 400))
def test_the_cut_is_the_longest_utf8_prefix_within_the_limit(line: str, limit: int) -> None:
    shown, shortened = cut_line(line, limit)
    encoded = shown.encode("utf-8")  # re-encodable: no split character, no surrogate
    assert encoded.decode("utf-8") == shown
    assert len(encoded) <= limit
    assert line.startswith(shown)
    assert shortened == (len(line.encode("utf-8")) > limit)
    if shortened:
        # Longest: the next character would not have fitted.
        assert len(encoded) + len(line[len(shown)].encode("utf-8")) > limit
    else:
        assert shown == line


@given(line=WIDE)
def test_the_default_cut_is_160_bytes(line: str) -> None:
    limit = Settings().max_line_bytes
    assert limit == 160
    shown, _ = cut_line(line, limit)
    assert len(shown.encode("utf-8")) <= 160


# --- the digests ------------------------------------------------------------------------


@given(text=st.text())
def test_the_digest_is_stable_and_the_sha256_of_the_utf8_bytes(text: str) -> None:
    data = text.encode("utf-8")
    assert sha256_hex(text) == sha256_hex(text) == sha256_hex(data)
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


@given(data=st.binary(min_size=1, max_size=512), where=st.integers(0), flip=st.integers(1, 255))
def test_the_digest_changes_on_any_single_byte(data: bytes, where: int, flip: int) -> None:
    changed = bytearray(data)
    changed[where % len(data)] ^= flip  # a different value at exactly one byte
    assert sha256_hex(bytes(changed)) != sha256_hex(data)


# --- the caps ---------------------------------------------------------------------------

N_FILES = 6
N_LINES = 80
_ALPHABET = "abcdefghij_ ()=:.,'" * 4 + "é中😀"


def file_text(seed: int) -> str:
    """Comment lines from empty to ~700 characters, some far over 160 bytes."""
    rng = random.Random(seed)
    lines = []
    for _ in range(N_LINES):
        length = rng.choice((0, 5, 30, 80, 150, 300, 700))
        lines.append("# " + "".join(rng.choice(_ALPHABET) for _ in range(length)))
    return "\n".join(lines) + "\n"


FILES: dict[str, str | bytes] = {f"pkg/m{i}.py": file_text(i) for i in range(N_FILES)}
PATHS = sorted(FILES)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    yield from shared_repo(tmp_path_factory, FILES)


@st.composite
def excerpts(draw: st.DrawFn) -> tuple[Excerpt, ...]:
    """Excerpts in rank order: real lines of real files, with gaps, odd qualnames."""
    drawn = []
    for rank in range(1, draw(st.integers(0, 10)) + 1):
        path = draw(st.sampled_from(PATHS))
        lines = str(FILES[path]).split("\n")[:N_LINES]
        start = draw(st.integers(1, N_LINES))
        end = draw(st.integers(start, min(N_LINES, start + 30)))
        numbers = sorted(draw(
            st.lists(st.integers(start, end), min_size=1, max_size=end - start + 1, unique=True)
        ))
        qualname = draw(st.none() | st.text(max_size=60).filter(bool))
        sources = draw(st.lists(st.sampled_from(("ripgrep", "apidesc", "callgraph")),
                                min_size=1, max_size=3, unique=True))
        candidate = Candidate(Span(path, start, end), "function", qualname, tuple(sources))
        drawn.append(Excerpt(
            RankedCandidate(candidate, rank, 1.0 / rank),
            tuple((n, lines[n - 1]) for n in numbers),
        ))
    return tuple(drawn)


@st.composite
def budgets(draw: st.DrawFn) -> Settings:
    caps = {
        "budget_tokens": draw(st.integers(20, 3000)),
        "max_block_bytes": draw(st.integers(200, 20000)),
        "max_reference_bytes": draw(st.integers(100, 5000)),
        "max_line_bytes": draw(st.integers(1, 400)),
    }
    return Settings.compact(**caps) if draw(st.booleans()) else Settings().with_overrides(**caps)


DIAGNOSTICS = st.lists(st.builds(
    Diagnostic,
    kind=st.sampled_from(("unavailable", "excluded")),
    reason=st.text(min_size=1, max_size=40),
    path=st.none() | st.text(min_size=1, max_size=40),
    detail=st.text(max_size=40),
), max_size=3).map(tuple)

SIZE_CAPS = {"references budget", "byte budget", "token budget"}
COUNT_BUDGETS = {"paths budget", "line budget", "quoted-text budget"}


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def assert_quoted_lines(excerpt: Excerpt, quoted: str, max_line_bytes: int) -> None:
    """Each source line shown as a prefix within the line cap, a gap marker where lines skip."""
    shown = quoted.split("\n")
    assert shown.pop() == ""  # every shown line ends with a newline
    previous = None
    for number, line in excerpt.lines:
        if previous is not None and number != previous + 1:
            assert shown.pop(0) == GAP  # the marker is not source text: no cap applies
        prefix = shown.pop(0)
        assert utf8_len(prefix) <= max_line_bytes
        assert line.startswith(prefix)
        previous = number
    assert shown == []


@settings(deadline=None,
          # The autouse cache fixture only sets environment variables; sharing
          # it across examples changes nothing.
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offered=excerpts(), caps=budgets(), found=DIAGNOSTICS)
def test_the_caps_are_never_exceeded(
    repo: Repo, offered: tuple[Excerpt, ...], caps: Settings, found: tuple[Diagnostic, ...]
) -> None:
    result = assemble(excerpts=offered, diagnostics=found, repo=repo, settings=caps)
    text = result.text
    included = [e for e in result.entries if e.included]

    # The hard caps.
    assert result.tokens == count_tokens(text) <= caps.budget_tokens
    assert result.budget_tokens == caps.budget_tokens
    assert utf8_len(text) <= caps.max_block_bytes
    headings = [e.text.split("\n", 1)[0] + "\n" for e in included]
    assert sum(map(utf8_len, headings)) <= caps.max_reference_bytes
    for entry in included:
        assert_quoted_lines(entry.excerpt, entry.evidence.text, caps.max_line_bytes)
    if caps.max_paths is not None:  # the compact profile's count budgets
        assert caps.max_quoted_lines is not None and caps.max_quoted_bytes is not None
        assert len({e.evidence.ref.path for e in included}) <= caps.max_paths
        assert sum(len(e.excerpt.lines) for e in included) <= caps.max_quoted_lines
        assert sum(utf8_len(e.evidence.text) for e in included) <= caps.max_quoted_bytes

    # Every offered excerpt has an entry, in rank order, whole or absent.
    assert [e.excerpt for e in result.entries] == list(offered)
    for entry, heading in zip(included, headings, strict=True):
        assert heading.startswith("### ") and heading.count("\n") == 1
        assert entry.text == heading + entry.evidence.text + "\n"
        assert entry.tokens == count_tokens(entry.text)
    if text:
        body = HEADER + "".join(e.text for e in included)
        assert text.startswith(body)
        closing = text[len(body):]
        assert closing.startswith("Coverage: ") and closing.endswith("not exhaustive.\n")
        assert closing.count("\n") == 1
    else:
        assert included == []
    if caps.max_paths is None:
        # Without count budgets the size caps keep a prefix of the ranking,
        # once the entries that could not be shown even alone are set aside:
        # alone, that is, with the coverage line of every other one omitted
        # (the room assemble keeps; a line counting fewer omissions can be a
        # byte shorter and let a borderline entry in).
        others_omitted = tuple(Diagnostic("omitted", "") for _ in offered[1:])
        showable = [
            e for e in result.entries
            if e.included or assemble(
                excerpts=(e.excerpt,), diagnostics=found + others_omitted, repo=repo,
                settings=caps,
            ).entries[0].included
        ]
        flags = [e.included for e in showable]
        assert flags == sorted(flags, reverse=True)

    # Each reference describes exactly what is shown and what was read.
    for entry in result.entries:
        ref = entry.evidence.ref
        numbers = [n for n, _ in entry.excerpt.lines]
        assert (ref.path, ref.start_line, ref.end_line) == (
            entry.excerpt.ranked.candidate.span.path, numbers[0], numbers[-1]
        )
        assert ref.content_digest == hashlib.sha256(str(FILES[ref.path]).encode()).hexdigest()
        assert ref.excerpt_digest == hashlib.sha256(entry.evidence.text.encode()).hexdigest()
        assert ref.shortened == any(
            utf8_len(line) > caps.max_line_bytes for _, line in entry.excerpt.lines
        )
        assert ref.base == repo.base

    # The given diagnostics come first, then one omission per excerpt not shown.
    assert result.diagnostics[: len(found)] == found
    omitted = result.diagnostics[len(found):]
    left_out = [e for e in result.entries if not e.included]
    assert [(d.kind, d.path, d.detail) for d in omitted] == [
        ("omitted", e.evidence.ref.path, e.excerpt.ranked.candidate.qualname or "")
        for e in left_out
    ]
    allowed = SIZE_CAPS | (COUNT_BUDGETS if caps.max_paths is not None else set())
    assert {d.reason for d in omitted} <= allowed
