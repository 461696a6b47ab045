"""The data passed between pipeline stages.

Every stage takes and returns these frozen dataclasses; plugins import them
from here and never from each other. Line numbers are 1-based and spans are
inclusive at both ends, as editors and tracebacks show them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Node kinds. Parsers of other languages name their type-like definitions
# after the language (a Rust trait is not a class), but every stage treats a
# TYPE_KINDS node as Python treats a class: a container whose own lines are
# what its members leave over.
FUNCTION_KINDS = frozenset({"function", "method"})
TYPE_KINDS = frozenset({"class", "struct", "enum", "interface", "trait", "impl", "namespace"})
MODULE = "module"  # a file's own node: its lines outside every definition
CONTAINER_KINDS = TYPE_KINDS | {MODULE}


@dataclass(frozen=True)
class Span:
    """A run of whole lines in one repository file."""

    path: str  # repo-relative, forward slashes
    start_line: int
    end_line: int

    def contains(self, other: Span) -> bool:
        return (
            self.path == other.path
            and self.start_line <= other.start_line
            and other.end_line <= self.end_line
        )


@dataclass(frozen=True)
class Query:
    """What the task asks for, extracted deterministically (spec §3.1)."""

    task_text: str
    identifiers: tuple[str, ...]  # resolve to a definition in the code index
    unresolved: tuple[str, ...]  # identifier-shaped, but defined nowhere in the repo
    error_strings: tuple[str, ...]
    test_names: tuple[str, ...]
    file_paths: tuple[str, ...]
    goal_hint: str
    latest_error: str = ""  # the traceback or error output, as given
    # What plugins added before recall (the ``describe_query`` hook): texts
    # saying what the code the task needs does, searched like the task.
    descriptions: tuple[Description, ...] = ()


@dataclass(frozen=True)
class Description:
    """A description of code the task will call or touch, in words (spec §2 row 11:
    AllianceCoder's decomposed query), added to the query by a plugin.

    Query text and nothing else: recall plugins search it against what the
    index knows of each definition; it never names a path to read, an option
    or a command. Candidates found through it carry ``source`` as their
    provenance.
    """

    text: str
    source: str  # the provenance of what it finds ("model-query")


@dataclass(frozen=True)
class Described:
    """What one ``describe_query`` plugin adds to the query: its descriptions, and
    the coverage diagnostics of what it could not do (a failed model call)."""

    descriptions: tuple[Description, ...]
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(frozen=True)
class Diagnostic:
    """Something the caller should know about coverage: a cut, a skip, a failure.

    ``kind`` is one of ``unavailable`` (a search or read failed or was
    truncated), ``excluded`` (a source refused as input) or ``omitted`` (cut
    by a budget).
    """

    kind: str
    reason: str
    path: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class Candidate:
    """A code region some stage believes is relevant, with its provenance.

    After merge, a candidate is one structural unit: a function, method or
    class of the code index, the module-level lines of a file (``kind ==
    "module"``), or for a file the index could not parse, a run of lines
    (``kind == "lines"``, ``qualname`` None).
    """

    span: Span
    kind: str  # function | method | class | module | lines
    qualname: str | None
    sources: tuple[str, ...]  # recall plugins that proposed it (sorted, once merged)
    terms: tuple[str, ...] = ()  # query terms that led to it
    hit_lines: tuple[int, ...] = ()  # lines a recall source pointed at, sorted
    recall_score: float = 0.0  # the source's own score (api-desc bm25), 0 if none
    # The task points at this place itself (a stack frame, a link to its
    # lines), not at a term it contains.
    pointed_at: bool = False
    # The lines of it the task points at (a frame's line, a link's lines),
    # sorted; none when it names the place by a name only.
    pointed_lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class Recall:
    """What one recall plugin returns for one query."""

    source: str
    candidates: tuple[Candidate, ...]
    diagnostics: tuple[Diagnostic, ...] = ()
    # Candidates no signal can weigh, placed in the ranking instead (the core's
    # ``stages/place.py``): what the plugin knows of the repository, not of
    # the task, such as the changelog most of its fixes update.
    placed: tuple[Candidate, ...] = ()


@dataclass(frozen=True)
class Signal:
    """One named piece of ranking evidence: a value for each merged candidate.

    An ``add`` signal adds ``weight * value`` to a candidate's base score; a
    ``scale`` signal multiplies the score by ``1 + weight * value``, so it can
    lift or sink a candidate in proportion to the evidence the others found
    but cannot rank a candidate that nothing else matched. The producing
    plugin chooses the default weight; ``Settings.signal_weights`` overrides
    it by name.
    """

    name: str
    values: tuple[float, ...]  # one per candidate, in the order the hook was given
    weight: float
    mode: str = "add"  # add | scale


@dataclass(frozen=True)
class RankedCandidate:
    candidate: Candidate
    rank: int  # 1-based
    score: float
    # Each signal's raw value for this candidate (name, value), by name: why it ranked here.
    signals: tuple[tuple[str, float], ...] = ()
    # When the learned fusion ranked it: the score it ranked by, and the
    # largest (feature, contribution) parts of that score, largest first.
    model_score: float | None = None
    contributions: tuple[tuple[str, float], ...] = ()
    # The model's own log-odds that the candidate holds a changed line, what
    # the slice reads as a probability: the model score less the weighted
    # values of signals the model does not read (a third party's), which
    # move the order but are no evidence of the model's calibration.
    log_odds: float | None = None


# How an excerpt shows its candidate (``Excerpt.shown_as``): all of its own
# lines, the lines that serve the goal (with the signature), or the signature alone.
WHOLE = "whole"
PRUNED = "pruned"
SIGNATURE = "signature"


@dataclass(frozen=True)
class Excerpt:
    """A ranked candidate cut down to the lines the model should see."""

    ranked: RankedCandidate
    lines: tuple[tuple[int, str], ...]  # (line number, text) in file order
    shown_as: str = PRUNED  # WHOLE, PRUNED or SIGNATURE


SOURCE_REF_SCHEMA = "ctx04.source-ref.v1"
TRACE_SCHEMA = "ctx04.repository-context.v1"  # one trace record per retrieval


@dataclass(frozen=True)
class SourceRef:
    """Where a rendered excerpt came from, and which bytes were observed.

    ``content_digest`` is the sha256 (hex) of the file's complete bytes as
    read for this retrieval, uncommitted changes included; ``base`` is the
    git HEAD when git could tell, so the pair identifies what was seen, not
    a clean tree. ``excerpt_digest`` is the sha256 of the excerpt's text
    exactly as rendered (UTF-8). ``shortened`` says a line was cut.
    """

    path: str
    start_line: int  # first and last line shown, 1-based inclusive
    end_line: int
    content_digest: str
    excerpt_digest: str
    shortened: bool
    base: str | None


@dataclass(frozen=True)
class Evidence:
    """A block of retrieved text a model was shown: untrusted data, never a template."""

    ref: SourceRef
    text: str  # the excerpt's lines as rendered, without the provenance heading


@dataclass(frozen=True)
class SliceEntry:
    excerpt: Excerpt
    text: str  # exactly what the slice shows for this excerpt, heading included
    tokens: int  # token count of ``text`` alone
    included: bool
    evidence: Evidence


@dataclass(frozen=True)
class ContextSlice:
    """The assembled context: what the model sees, and what was left out."""

    text: str
    tokens: int  # token count of exactly ``text``
    budget_tokens: int
    entries: tuple[SliceEntry, ...]  # every excerpt offered, in rank order
    diagnostics: tuple[Diagnostic, ...] = field(default=())


@dataclass(frozen=True)
class Node:
    """A definition in the code index."""

    qualname: str
    name: str
    kind: str  # one of FUNCTION_KINDS, TYPE_KINDS or "module"
    span: Span
    header_end: int  # last line of the signature (a ``def`` may span lines)
    signature: str  # the header on one line, whitespace folded
    docstring: str  # first paragraph, at most 200 characters


@dataclass(frozen=True)
class Edge:
    """A reference out of a definition, by name; resolved at query time."""

    source: str  # qualname of the definition the reference sits in
    kind: str  # invoke | import | contain
    target: str  # a name, a dotted module path, or a contained qualname
    line: int


@dataclass(frozen=True)
class ParsedFile:
    """What a language parser extracts from one source file."""

    language: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    # Spans of statements that cover more than one line (for compound
    # statements, just the header), so stages can widen a kept line to the
    # whole statement without re-parsing.
    multiline_statements: tuple[tuple[int, int], ...]
    # First lines of the regions a parser had to skip (tree-sitter ERROR
    # nodes): the file is indexed from what did parse, and these are reported.
    error_lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class NodeValues:
    """Values a plugin derives from each definition of a file as the index
    records it (the meaning plugin's vectors), kept beside the nodes."""

    # "<plugin>:<what>": the plugin's own namespace, and everything the values
    # depend on besides the file (an encoder's identity), so values made
    # another way are never read back as these.
    key: str
    values: tuple[bytes | None, ...]  # one per parsed node, in order; None stores nothing


# The decision door (repository-source-references, "When a decision door is
# configured"): a model may reorder the rendered evidence, never erase it.
SELECT_SITE = "repository/select"
# Bounds of what a door may disclose of a candidate, least first.
PATH_ONLY = "path-only"
PATH_SPAN = "path-span"
CONTENT = "content"


@dataclass(frozen=True)
class Observed:
    """One candidate of the evidence a door may rank: its observable record.

    Never its content: an excerpt's text stays out of every record. A refused
    file (kind ``excluded`` diagnostic) has no span, size or digest, only
    the reason it was withheld.
    """

    option: str  # the name a door offers it under: c1, c2, … in the block's order
    path: str
    readiness: str  # shown | omitted (cut by a budget) | refused
    start_line: int | None = None
    end_line: int | None = None
    bytes: int | None = None  # UTF-8 bytes of the excerpt as it renders
    content_digest: str | None = None  # sha256 of the file's complete bytes as read
    withheld: str = ""  # why a refused file was not read


@dataclass(frozen=True)
class Observation:
    """What one retrieval observed, as a door sees it: the task, the candidates
    (the slice's excerpts in order, then each refused file) and the omissions."""

    task: str
    candidates: tuple[Observed, ...]
    omissions: tuple[Diagnostic, ...]  # the slice's coverage diagnostics


@dataclass(frozen=True)
class DecisionCall:
    """The repository/select call as the trace records it, whether or not it ranked.

    ``outcome`` is ``ranked``, ``abstained`` (the set's own "none"),
    ``refused`` (the model's typed refusal), ``failed`` (transport, timeout,
    an answer that is not the set's, an option not offered) or ``skipped``
    (nothing was asked: no model, or one path); ``reason`` says why it did
    not rank. Tokens, seconds and cost are 0 when no request was sent.
    """

    outcome: str
    reason: str
    question_set: str
    model: str  # the model named in the settings; "" when none is
    model_artifact: str = ""  # the model the server said answered
    cached: bool = False  # a stored ranking answered; nothing was sent
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class Selection:
    """A ranking a door chose over the offered options (``repository_context.selection``).

    ``pick`` renders first, in its order; ``unranked`` keeps the
    deterministic order after it. ``candidates`` holds every offered record
    with the bound it sat under (what the door could disclose of it);
    ``identities`` every digest and name the judgment is attributable to.
    """

    verdict: str  # "ranked"
    pick: tuple[str, ...]
    distribution: tuple[tuple[str, float], ...]  # (option, probability) as the model gave it
    any_relevant: float | None
    coverage: float | None
    unranked: tuple[str, ...]
    candidates: tuple[tuple[Observed, str], ...]  # (record, bound)
    omissions: tuple[Diagnostic, ...]
    identities: tuple[tuple[str, str], ...]  # (name, digest or name)


@dataclass(frozen=True)
class Decision:
    """A door's answer: the call, and the selection when it ranked."""

    call: DecisionCall
    selection: Selection | None = None
