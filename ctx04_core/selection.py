"""Where a decision door meets the slice: what it is shown, and the only change it may make.

The door sees an :class:`~ctx04_core.types.Observation` built here from the
assembled slice, never the excerpts' text. Its pick changes only the order
in which the slice's shown excerpts render: the excerpts the deterministic
order showed are exactly the excerpts shown after, within the same budgets,
so a judgment reorders evidence and cannot erase it.
"""

from __future__ import annotations

from ctx04_core.types import ContextSlice, Excerpt, Observation, Observed, Selection

SHOWN = "shown"
OMITTED = "omitted"
REFUSED = "refused"


def observe(task: str, context: ContextSlice) -> Observation:
    """Every excerpt the slice offered, in its order, then every refused file once."""
    candidates = [
        Observed(
            _option(index), entry.evidence.ref.path, SHOWN if entry.included else OMITTED,
            entry.evidence.ref.start_line, entry.evidence.ref.end_line,
            len(entry.evidence.text.encode("utf-8")), entry.evidence.ref.content_digest,
        )
        for index, entry in enumerate(context.entries)
    ]
    refused: dict[str, str] = {}
    for diagnostic in context.diagnostics:
        if diagnostic.kind == "excluded" and diagnostic.path is not None:
            refused.setdefault(diagnostic.path, diagnostic.reason)
    for path, reason in refused.items():
        candidates.append(Observed(_option(len(candidates)), path, REFUSED, withheld=reason))
    return Observation(task, tuple(candidates), context.diagnostics)


def distinct_paths(observation: Observation) -> int:
    return len({candidate.path for candidate in observation.candidates})


def picked_order(context: ContextSlice, selection: Selection) -> tuple[Excerpt, ...]:
    """The slice's excerpts with the picked shown ones first, in the pick's order.

    The other shown excerpts follow in their order, then the ones the
    budgets left out, so the same excerpts fit the same budgets. A picked
    refused file or cut excerpt has nothing to move.
    """
    entries = context.entries
    position = {_option(index): index for index in range(len(entries))}
    first = [
        position[option] for option in selection.pick
        if option in position and entries[position[option]].included
    ]
    rest = [i for i, e in enumerate(entries) if e.included and i not in first]
    left_out = [i for i, e in enumerate(entries) if not e.included]
    return tuple(entries[i].excerpt for i in (*first, *rest, *left_out))


def _option(index: int) -> str:
    """The option name of the observation's candidate at 0-based ``index``."""
    return f"c{index + 1}"


def shown_ranks(context: ContextSlice) -> frozenset[int]:
    return frozenset(e.excerpt.ranked.rank for e in context.entries if e.included)
