"""The ``"value"`` slice (issue 22): the code that must change, shown as well.

It plans the ``"signatures"`` slice first (``stages/shapes.py``), as
assemble will render it, then spends what is left of the budgets on whole
bodies, in rank order, of the functions and methods among the first
``value_ranks``, or in the files of the first ``value_files`` candidates,
whose fused score is at least ``value_score_share`` of the best (of at most
``whole_body_max_lines`` lines), and of the first candidate when it is a
type. The leading candidates' files are the likeliest to change, and the
change often goes on in their other functions: on the training tasks, bodies
there past ``value_ranks`` added 0.008–0.027 of line recall for at most
0.005 of irrelevant share (the first candidate's file; the first three
candidates' files added more). A type's body is its own lines: header,
docstring, attributes and the blank lines between members (where a new
member goes: dropping them lost 0.02 of dev line recall). Its members are
candidates of their own; the change is often in the leading type's own lines
(a model's fields, an enum's values: 0.06 of the changed lines of the Python
training tasks, which a type's signature does not show), but the own lines
of a type ranked second to fifth were 98 % irrelevant there and held 1 % of
the changed lines: those types keep their signatures. A body replaces its
candidate's signature only when the difference fits, so every candidate the
``"signatures"`` slice shows is still shown: the slice names the same places
and shows more of the lines to edit. The score share is the evidence that
the body is where the change is: on the training tasks a body shown by rank
alone was more often far from the change than near it.

Before the bodies, each of the first ``leader_ranks`` candidates that is a
type of at most ``type_span_max_lines`` lines is shown as its whole span,
members too, when that fits: a small class (a linter rule, a handler, a
model) is the unit the change goes in, and its own lines leave out the
methods that change. Better-ranked candidates inside it keep what they
show and their lines are left out of its excerpt; worse-ranked ones inside
it keep their signatures, their lines being shown there.

Last, each of the first ``leader_ranks`` candidates still cut to its best
lines (a body too long for the budgets, a module's own lines) grows to its
lines scoring at least ``leader_line_ratio`` of its best, each with
``leader_line_context`` lines either side, when the difference fits: in a
long function or a file's own lines the change is often a few lines from
the line that matches the task rather than on it (on the training tasks a
535-line method's best line was four lines above the change). So does a
leader whose body the score share wanted but which is too long for what is
left (a C program's 486-line ``main``), or else shows its best lines alone:
its signature alone hid the lines to change (stop 59: dev multilingual
line recall +0.007, jq-2919 0 -> 0.52). Other signatures do not grow: that
would show bodies the score share refused.

A slice in doubt shows more: when the learned order is not sure of its most
probable candidate, which is sure when that candidate has a probability of
holding a changed line (the model's own, ``RankedCandidate.log_odds``: a
signal the model does not read moves the order by its weight, which is no
log-odds) of at least ``doubt_probability`` and at least ``sure_margin``
times the next one's (two leaders alike: either may be wrong; held out, the
margin moved Python line recall 0.470 -> 0.486 for an irrelevant share 0.799
-> 0.801) and is no module (``doubt_module_leader``: a module leading, the
order is sure of a file, not of the lines to edit in it; stop 71, 3 slices
of 863 gained a changed line, none lost one), the ranked functions and
methods with a probability of at least ``doubt_floor`` are shown whole too,
in rank order, last, when they fit;
those the line floor (``stages/prune.py``) left out as well, in their rank's
place and apart from the lines shown (the floor reads the task's words, and
the function to change is often one whose lines share none: training line
recall +0.009 Python, +0.010 multilingual, irrelevant share down 0.002 and
0.001). A slice that misses every changed line is wholly irrelevant however
little it shows, so bodies spent where the leaders are probably wrong cost
precision only in the few slices where they were right; where the leaders
are probable, the slice stays as tight as above (on the training tasks: line
recall +0.029 Python, +0.019 multilingual, irrelevant share +0.003 and
+0.002). Then, still in doubt, the functions and methods the learned order
placed past ``top_k`` (its reserve) in the files the slice shows, with a
probability of at least ``doubt_pool_floor``, are shown whole, in its order,
apart from every line already shown, when they fit: the function to change
is often a sibling of the one that ranked, which the task's words did not
lift into the first ``top_k`` (training: multilingual line recall +0.028,
Python +0.004, irrelevant share +0.011 and +0.007). Last, still in doubt
(``doubt_head``), the head of the first candidate's file, its lines before
its first definition (imports, constants, the module docstring), less the
lines shown, when it fits: a fix often adds an import or changes a constant
there, and no candidate holds those lines (training: Python line recall
+0.025, multilingual +0.009, irrelevant share -0.008 and equal). Not in
doubt, the head's import lines alone, when the file has at most
``leading_imports_max`` of them: a short import block costs a few lines, and
the whole head in every slice cost 0.01 of irrelevant share (stop 60; at
stop 64 the imports alone: 7 tasks up on six sets, none down, irrelevant
share +0.002 at most).

A slice the learned order is sure of shows less: a function or method the
model gives less than ``sure_floor`` is shown as its signature, not whole
nor grown, whatever its rank or score share. On the training tasks held
out and dev (785 slices) this changed 56 slices, leaving out a fifth to a
third of the lines each showed; 2 % of those lines were relevant, and 2
slices lost a changed line (irrelevant share -0.010 Python, -0.006
multilingual, line recall -0.003 and equal).

Then each planned function or method of at most ``short_function_lines``
lines that is not yet whole (a signature the score share or a sure slice
left alone, best lines) is shown whole, in rank order, when the difference
fits: its body costs a line or four more than its signature, which says
little of what it does and hides a change in it. Improbable or not: on dev
and the training tasks the bodies this adds held the change in 6 slices,
none lost a changed line, and the irrelevant share rose by at most 0.002
(Loc-Bench: no line, up to 0.005; stop 71).

Last of all (``blank_line_ends``), every planned excerpt shows the blank
lines right after each run of its lines, and right before each run of at
least ``BLANK_BEFORE_RUN`` lines, that no excerpt shows, when they fit: a
fix that adds a function, a method or a block puts it there, and a pure
insertion's changed line is the line before it, a blank line more often
than not (unshown blank changed lines were 0.085 of dev Python's changed
lines, 0.109 of the training Python sample's). Not before every run: each
signature has blank lines before it, and few of those hold a change (dev:
0.007 of line recall for 0.018 of irrelevant share). A run of more than
``BLANK_RUN_MAX`` blank lines is the file's layout, not a separator.
Then the first candidate's excerpt shows ``first_run_context`` lines either
side of each of its runs, all when they fit, else run by run in file order
while they fit: the change is often a line or three from a run of its best
lines, of a type's or a module's own lines, or just outside a body (dev
multilingual line recall +0.017, training multilingual +0.010, Loc-Bench
breadth +0.017, no task down; docs/benchmarks.md, stop 63). So do the runs
of each later candidate the learned order gives at least
``run_context_floor`` (dev line recall +0.005 Python and multilingual,
Loc-Bench sample +0.010, no task down; stop 64), after every excerpt's
blank lines, which cost less.

Last of all, in doubt (``doubt_hit_floor``), each planned function or
method a recall source found a task's term in (its hit lines) and the
learned order gives at least that probability, under ``doubt_floor`` or
passed over for want of room, is shown whole, in rank order, when it
fits: a body the task's words reach holds the change often enough for the
room every other rule left (stop 75: 6 tasks up over seven sets, none
down, irrelevant share +0.002 at most). Before the siblings and the head
such bodies took their room and lost (stop 45's lower ``doubt_floor``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from ctx04_core.ranking.model import own_probability, sure_of
from ctx04_core.repository import Repo, SourceFile
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import own_text, runs
from ctx04_core.stages.room import Room
from ctx04_core.stages.shapes import Shapes, lines_shown, signatures_shape
from ctx04_core.types import (
    FUNCTION_KINDS,
    MODULE,
    PRUNED,
    SIGNATURE,
    TYPE_KINDS,
    WHOLE,
    Candidate,
    Excerpt,
    Node,
    RankedCandidate,
    Span,
)

# The provenance of a leading file's head: no recall found it, the slice adds it.
HEAD = "head"


def value_shape(
    shapes: list[Shapes], ranked: tuple[RankedCandidate, ...],
    reserve: tuple[RankedCandidate, ...], repo: Repo, settings: Settings,
) -> list[Excerpt]:
    """The ``"signatures"`` slice (its whole leader pruned when the body does not
    fit; where the learned order is sure of a candidate, every function it
    finds improbable its signature alone, never a body nor grown), then the
    small types among the leaders as their spans, then whole
    bodies of the definitions within ``value_ranks`` or in the files of the
    first ``value_files`` candidates with a score near the best, in rank
    order, then the best lines of the leaders still cut to them, or wanted
    whole and too long, with their neighbours, then, in doubt, the bodies
    the learned order finds probable enough, among the candidates and then
    in its reserve, and the leading file's head (not in doubt: its few
    imports), each while what it adds fits what is left of the budgets;
    then the short functions still not whole, as their bodies; last, the
    blank lines at the ends of every planned excerpt's runs
    (``blank_line_ends``), then the lines beside the runs of the first and
    the probable candidates (``first_run_context``); in doubt, last, the
    bodies of the functions the task's terms were found in that are at
    least ``doubt_hit_floor`` probable."""
    excerpts = signatures_shape(shapes, ranked, settings)
    doubt = _in_doubt(ranked, settings)
    improbable = _improbable_in_sure_slice(doubt, settings)
    for i, shape in enumerate(shapes):
        if excerpts[i].shown_as == WHOLE and improbable(shape.item):
            excerpts[i] = shape.signature_only() or shape.pruned()
    room = Room(repo, settings)
    planned = 0
    for i, shape in enumerate(shapes):
        if room.take(excerpts[i]):
            planned += 1
            continue
        if excerpts[i].shown_as == WHOLE and room.take(pruned := shape.pruned()):
            excerpts[i] = pruned  # a leader too large for what is left: its best lines
            planned += 1
            continue
        # Past a budget the rest is assemble's to cut and name. The planned
        # entries may still grow into bodies: the budget that ran out may be
        # one a body does not spend (the headings of long paths).
        break
    best = max((r.score for r in ranked), default=0.0)
    leading_files = {r.candidate.span.path for r in ranked[: settings.value_files]}
    shown_whole = _small_types_whole(shapes[:planned], excerpts, room)

    def worth(shape: Shapes) -> bool:
        return _worth_whole(shape, best, leading_files, settings) and not improbable(shape.item)

    _bodies_whole(shapes, excerpts, planned, room, shown_whole, settings, worth)
    # In a leader cut to its best lines (a body too long for the budget, a
    # module's own lines) the change is often a few lines from a line that
    # matches the task. Signatures the score share refused stay: growing them
    # too raised the irrelevant share.
    for i, shape in enumerate(shapes[:planned]):
        if (
            shape.item.rank > settings.leader_ranks or improbable(shape.item)
            or _inside(shape.item.candidate.span, shown_whole)
        ):
            continue
        if excerpts[i].shown_as == PRUNED:
            growths: tuple[Callable[[], Excerpt], ...] = (shape.near_good_lines,)
        elif (excerpts[i].shown_as == SIGNATURE
              and _worth_whole(shape, best, leading_files, settings)):
            # A body the score share wanted, too long for what is left: its
            # best lines, with their neighbours when those fit.
            growths = (shape.near_good_lines, shape.pruned)
        else:
            continue
        for grow in growths:
            grown = grow()
            if len(grown.lines) > len(excerpts[i].lines) and room.replace(excerpts[i], grown):
                excerpts[i] = grown
                break
    tail = len(excerpts)  # what the doubt adds after the excerpts past the budgets
    if doubt:
        _bodies_whole(
            shapes, excerpts, planned, room, shown_whole, settings,
            lambda shape: _worth_whole_in_doubt(shape, settings),
        )
        # The ranked functions whose every line the floor refused are candidates
        # all the same: in doubt they are weighed by their probability too, and
        # shown in their rank's place.
        kept = {shape.item for shape in shapes}
        refused = tuple(item for item in ranked if item not in kept)
        shown = lines_shown(excerpts[:planned])
        floored = _apart_whole(
            refused, shown, room, repo, settings,
            lambda item: _at_least(item, settings.doubt_floor),
        )
        excerpts[:planned] = sorted(
            excerpts[:planned] + floored, key=lambda excerpt: excerpt.ranked.rank
        )
        planned += len(floored)
        tail = len(excerpts)
        excerpts.extend(_apart_whole(
            reserve, shown, room, repo, settings,
            lambda item: item.candidate.span.path in shown
            and _at_least(item, settings.doubt_pool_floor),
        ))
        head = (
            _leading_head(ranked, len(ranked) + len(reserve) + 1, excerpts, repo)
            if settings.doubt_head else None
        )
        if head is not None and room.take(head):
            excerpts.append(head)
    elif settings.leading_imports_max:
        imports = _leading_imports(
            _leading_head(ranked, len(ranked) + 1, excerpts, repo), repo,
            settings.leading_imports_max,
        )
        if imports is not None and room.take(imports):
            excerpts.append(imports)
    if settings.short_function_lines:
        _bodies_whole(
            shapes, excerpts, planned, room, shown_whole, settings,
            lambda shape: shape.item.candidate.kind in FUNCTION_KINDS
            and len(shape.text) <= settings.short_function_lines,
        )
    if settings.blank_line_ends or settings.first_run_context:
        _widened_runs(
            excerpts, [*range(planned), *range(tail, len(excerpts))], room, repo, settings
        )
    if doubt and settings.doubt_hit_floor > 0:
        _bodies_whole(
            shapes, excerpts, planned, room, shown_whole, settings,
            lambda shape: shape.item.candidate.kind in FUNCTION_KINDS
            and bool(shape.item.candidate.hit_lines)
            and _at_least(shape.item, settings.doubt_hit_floor),
        )
    return excerpts


# The shortest run of lines (a body) whose blank lines before it are shown.
BLANK_BEFORE_RUN = 10


BLANK_RUN_MAX = 3


def _widened_runs(
    excerpts: list[Excerpt], planned: list[int], room: Room, repo: Repo, settings: Settings
) -> None:
    """Each planned excerpt (``planned``: indices, best first) with the lines
    beside its runs that no excerpt shows, when they fit: first every
    excerpt's blank lines at its runs' ends (``blank_line_ends``: cheap, and
    where an insertion goes), then, for the first candidate and each later
    one at least ``run_context_floor`` probable, ``first_run_context`` lines
    either side of each run, of as many of its runs, in file order, as fit."""
    shown = lines_shown([excerpts[i] for i in planned])
    planned_runs = {i: runs([n for n, _ in excerpts[i].lines]) for i in planned}
    if settings.blank_line_ends:
        for i, source, taken in _sources(excerpts, planned, shown, repo):
            blank = _blank_ends(planned_runs[i], source.lines)
            _widen(excerpts, i, _with_lines(excerpts[i], blank, taken, source), taken, room)
    reach = settings.first_run_context
    if not reach:
        return
    for i, source, taken in _sources(excerpts, planned, shown, repo):
        if not _with_context(excerpts[i].ranked, settings):
            continue
        each = [
            [n for n in (*range(start - reach, start), *range(end + 1, end + reach + 1))
             if 1 <= n <= len(source.lines)]
            for start, end in planned_runs[i]
        ]
        # All runs, else the most that fit, halving: each try renders the
        # excerpt, and a C module's own lines can be a hundred runs.
        best = excerpts[i]
        fit, unfit, middle = 0, len(each) + 1, len(each)
        while unfit - fit > 1:
            wider = _with_lines(
                excerpts[i], (n for run in each[:middle] for n in run), taken, source
            )
            if room.fits(excerpts[i], wider):
                fit, best = middle, wider
            else:
                unfit = middle
            middle = (fit + unfit) // 2
        _widen(excerpts, i, best, taken, room)


def _sources(
    excerpts: list[Excerpt], planned: list[int], shown: dict[str, set[int]], repo: Repo
) -> Iterator[tuple[int, SourceFile, set[int]]]:
    """Each planned excerpt that shows lines, with its file and the file's shown lines."""
    for i in planned:
        source = repo.source(excerpts[i].ranked.candidate.span.path)
        if source is not None and excerpts[i].lines:
            yield i, source, shown.setdefault(excerpts[i].ranked.candidate.span.path, set())


def _with_context(item: RankedCandidate, settings: Settings) -> bool:
    """Whether the candidate's runs get ``first_run_context`` lines either side."""
    return item.rank == 1 or (
        settings.run_context_floor > 0 and _at_least(item, settings.run_context_floor)
    )


def _with_lines(
    excerpt: Excerpt, lines: Iterable[int], taken: set[int], source: SourceFile
) -> Excerpt:
    """The excerpt with those of ``lines`` (of ``source``) that are not ``taken``."""
    text = dict(excerpt.lines)
    text.update((n, source.lines[n - 1]) for n in lines if n not in taken)
    return Excerpt(excerpt.ranked, tuple(sorted(text.items())), excerpt.shown_as)


def _widen(
    excerpts: list[Excerpt], i: int, wider: Excerpt, taken: set[int], room: Room
) -> None:
    """``wider`` in place of excerpt ``i`` when it adds lines and fits."""
    if len(wider.lines) > len(excerpts[i].lines) and room.replace(excerpts[i], wider):
        excerpts[i] = wider
        taken.update(n for n, _ in wider.lines)


def _blank_ends(line_runs: Sequence[tuple[int, int]], text: tuple[str, ...]) -> list[int]:
    """The blank lines of ``text`` (a file's lines) right after each run, and
    right before each run of at least ``BLANK_BEFORE_RUN`` lines."""
    found: list[int] = []
    for start, end in line_runs:
        found += _blank_run(text, end + 1, 1)
        if end - start + 1 >= BLANK_BEFORE_RUN:
            found += _blank_run(text, start - 1, -1)
    return found


def _blank_run(text: tuple[str, ...], first: int, step: int) -> list[int]:
    """The blank lines from ``first`` on (``step`` 1: down, -1: up), at most
    ``BLANK_RUN_MAX``; none when there are more."""
    run = []
    number = first
    while 1 <= number <= len(text) and not text[number - 1].strip():
        run.append(number)
        number += step
    return run if len(run) <= BLANK_RUN_MAX else []


def _leading_head(
    ranked: tuple[RankedCandidate, ...], rank: int, shown: list[Excerpt], repo: Repo
) -> Excerpt | None:
    """The lines of the first candidate's file before its first definition (its
    imports, constants, docstring), less the lines ``shown``, as an excerpt of
    its module ranked ``rank``; None when there are none or the file has no
    definition."""
    if not ranked:
        return None
    path = ranked[0].candidate.span.path
    source = repo.source(path)
    bounds = _module_and_first_definition(path, repo)
    if bounds is None or source is None:
        return None
    module, first = bounds
    taken = lines_shown(shown).get(path, set())
    head = range(1, min(first, len(source.lines) + 1))
    lines = [(n, source.lines[n - 1]) for n in head if n not in taken]
    while lines and not lines[-1][1].strip():
        lines.pop()  # those before the first definition are blank_line_ends' to show
    if not lines:
        return None
    # Its candidate spans the head alone: what later stages add to an excerpt
    # (the lines its shown lines depend on) stays inside the head.
    candidate = Candidate(Span(path, 1, lines[-1][0]), MODULE, module.qualname, (HEAD,))
    shown_as = WHOLE if len(lines) == lines[-1][0] else PRUNED
    return Excerpt(RankedCandidate(candidate, rank, 0.0), tuple(lines), shown_as)


def _module_and_first_definition(path: str, repo: Repo) -> tuple[Node, int] | None:
    """The file's module node and the first line of its first definition; None
    when the index has no module or no definition for it."""
    nodes = repo.index.file_nodes(path)
    module = next((n for n in nodes if n.kind == MODULE), None)
    first = min((n.span.start_line for n in nodes if n.kind != MODULE), default=None)
    return None if module is None or first is None else (module, first)


def _leading_imports(head: Excerpt | None, repo: Repo, most: int) -> Excerpt | None:
    """The ``head``'s import lines (those the index records an import on: a
    statement's, or each name's of a statement over several lines) alone,
    when its file has at most ``most`` of them before its first definition;
    else None."""
    if head is None:
        return None
    bounds = _module_and_first_definition(head.ranked.candidate.span.path, repo)
    if bounds is None:
        return None
    module, first = bounds
    before = {
        e.line for e in repo.index.edges_from(module) if e.kind == "import" and e.line < first
    }
    lines = tuple((n, text) for n, text in head.lines if n in before)
    if not lines or len(before) > most:
        return None
    return Excerpt(head.ranked, lines, PRUNED)


def _apart_whole(
    items: tuple[RankedCandidate, ...], shown: dict[str, set[int]], room: Room, repo: Repo,
    settings: Settings, worth: Callable[[RankedCandidate], bool],
) -> list[Excerpt]:
    """In order, each function or method of ``items`` that ``worth`` accepts, at
    most ``whole_body_max_lines`` long and apart from every line ``shown``, as
    its body when it fits what is left; ``shown`` (lines per file) grows with
    each body taken."""
    cap = settings.whole_body_max_lines
    bodies = []
    for item in items:
        span = item.candidate.span
        if (
            item.candidate.kind not in FUNCTION_KINDS or not worth(item)
            or (cap is not None and span.end_line - span.start_line + 1 > cap)
            or not shown.get(span.path, set()).isdisjoint(range(span.start_line, span.end_line + 1))
        ):
            continue
        body = Excerpt(item, tuple(own_text(item.candidate, repo)), WHOLE)
        if body.lines and room.take(body):
            bodies.append(body)
            shown.setdefault(span.path, set()).update(n for n, _ in body.lines)
    return bodies


def _bodies_whole(
    shapes: list[Shapes], excerpts: list[Excerpt], planned: int, room: Room,
    shown_whole: list[Span], settings: Settings, worth: Callable[[Shapes], bool],
) -> None:
    """In rank order, each of the first ``planned`` excerpts not yet whole nor
    inside a span shown whole, whose candidate ``worth`` accepts and is at
    most ``whole_body_max_lines`` long, as its body when the difference fits
    what is left. An excerpt finds its shape by its candidate, not its place:
    in doubt the planned excerpts take in the floored ones, which have none."""
    cap = settings.whole_body_max_lines
    shape_of = {shape.item: shape for shape in shapes}
    for i in range(planned):
        shape = shape_of.get(excerpts[i].ranked)
        if (
            shape is None or excerpts[i].shown_as == WHOLE
            or _inside(shape.item.candidate.span, shown_whole)
            or (cap is not None and len(shape.text) > cap) or not worth(shape)
        ):
            continue
        whole = shape.whole()
        if room.replace(excerpts[i], whole):
            excerpts[i] = whole


def _small_types_whole(
    shapes: list[Shapes], excerpts: list[Excerpt], room: Room
) -> list[Span]:
    """Each of the first ``leader_ranks`` candidates that is a type of at most
    ``type_span_max_lines`` lines, as its whole span when it fits, less the
    lines of better-ranked candidates inside it (shown above it); the
    worse-ranked ones inside it (its members) are shown there, so each keeps
    only its signature. The spans shown whole."""
    spans: list[Span] = []
    for i, shape in enumerate(shapes):
        span = shape.item.candidate.span
        if shape.span_text is None or _inside(span, spans):
            continue
        inner = [
            j for j in range(len(shapes))
            if j != i and _inside(shapes[j].item.candidate.span, [span])
        ]
        above = {n for j in inner if j < i for n, _ in excerpts[j].lines}
        planned = {j: excerpts[j] for j in inner if j > i}
        for j in planned:
            signature = shapes[j].signature_only()
            if signature is not None and room.replace(excerpts[j], signature):
                excerpts[j] = signature
        lines = tuple((n, text) for n, text in shape.span_text if n not in above)
        whole = Excerpt(shape.item, lines, WHOLE)
        if room.replace(excerpts[i], whole):
            excerpts[i] = whole
            spans.append(span)
            continue
        for j, excerpt in planned.items():  # too large: the members as they were planned
            room.replace(excerpts[j], excerpt)
            excerpts[j] = excerpt
    return spans


def _inside(span: Span, containers: list[Span]) -> bool:
    return any(container.contains(span) for container in containers)


def _worth_whole(
    shape: Shapes, best: float, leading_files: set[str], settings: Settings
) -> bool:
    item = shape.item
    kind = item.candidate.kind
    return (
        (kind in FUNCTION_KINDS or (kind in TYPE_KINDS and item.rank == 1))
        and (item.rank <= settings.value_ranks or item.candidate.span.path in leading_files)
        and best > 0
        and item.score >= settings.value_score_share * best
    )


def _in_doubt(ranked: tuple[RankedCandidate, ...], settings: Settings) -> bool:
    """Whether the learned order is not sure of its most probable candidate
    (``sure_of``: a probability of holding a changed line of at least
    ``doubt_probability`` and ``sure_margin`` times the next one's), or that
    candidate is a module (``doubt_module_leader``); never when a candidate
    has no probability (the weighted fusion)."""
    probabilities = [own_probability(r) for r in ranked]
    known = [p for p in probabilities if p is not None]
    if not known or len(known) != len(probabilities):
        return False
    # The first of the most probable, as the rank order has them.
    leader = ranked[probabilities.index(max(known))]
    if settings.doubt_module_leader and leader.candidate.kind == MODULE:
        return True
    return not sure_of(known, settings.doubt_probability, settings.sure_margin)


def _improbable_in_sure_slice(
    doubt: bool, settings: Settings
) -> Callable[[RankedCandidate], bool]:
    """Whether a candidate is a function or method the learned order gives less
    than ``sure_floor`` while it is sure of another (the slice is not in
    ``doubt``); never under the weighted fusion, which gives no probability."""
    if settings.sure_floor <= 0 or doubt:
        return lambda _item: False

    def improbable(item: RankedCandidate) -> bool:
        p = own_probability(item)
        return item.candidate.kind in FUNCTION_KINDS and p is not None and p < settings.sure_floor

    return improbable


def _worth_whole_in_doubt(shape: Shapes, settings: Settings) -> bool:
    item = shape.item
    return item.candidate.kind in FUNCTION_KINDS and _at_least(item, settings.doubt_floor)


def _at_least(item: RankedCandidate, floor: float) -> bool:
    p = own_probability(item)
    return p is not None and p >= floor
