"""Every number the pipeline uses, named once, with the spec's defaults.

A default changes only when the retrieval benchmark shows the change wins
(spec §7.4); the JSON output echoes the settings that produced it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

# Where a model is asked (the decision door, issue 14): the environment
# gives the defaults, so a user points ctx04 at a model without a flag.
MODEL_URL_ENV = "CTX04_MODEL_URL"
MODEL_ENV = "CTX04_MODEL"
MODEL_LOCALITY_ENV = "CTX04_MODEL_LOCALITY"
LOCALITIES = ("hosted", "local")
# Settings.slice_shape: how prune spends the slice's budget.
VALUE = "value"
SIGNATURES = "signatures"
SLICE_SHAPES = (VALUE, SIGNATURES)
# Settings.fusion: how the signals become the rank order; from the
# environment too, so every command and the server can rank by a model.
WEIGHTED = "weighted"
LEARNED = "learned"
FUSIONS = (WEIGHTED, LEARNED)
FUSION_ENV = "CTX04_FUSION"
RANKING_MODEL_ENV = "CTX04_RANKING_MODEL"
# The meaning plugin's encoder (an optional extra), from the environment too,
# so a user points the CLI at a code model without a flag.
MEANING_ENCODER_ENV = "CTX04_MEANING_ENCODER"
MEANING_MODEL_ENV = "CTX04_MEANING_MODEL"


ENV_METADATA = "env"


class SettingsError(ValueError):
    """A setting's value that cannot be used (one from the environment, too)."""


def _from_env(name: str, default: str = "") -> Any:
    # The metadata names the variable for the config layers (ctx04_core/config.py):
    # when it is set, it outranks the config files.
    return field(
        default_factory=lambda: os.environ.get(name, default), metadata={ENV_METADATA: name}
    )


@dataclass(frozen=True)
class Settings:
    # §3.1 query construction. A task or error text longer than
    # max_task_chars is cut (and the cut reported): every stage scores its
    # terms against every candidate, and a 5 MB paste took 50 s. The CLI
    # reads a --task-file or --error-file no further than one character past it.
    max_task_chars: int = 64 * 1024
    max_identifiers: int = 32
    # Measured on the dev split (docs/benchmarks.md): a one-letter or stopword
    # "identifier" names some definition in any large repository and adds noise.
    drop_stopword_identifiers: bool = True
    max_error_strings: int = 8
    max_test_names: int = 8
    max_file_paths: int = 8
    max_term_chars: int = 120
    max_goal_hint_chars: int = 200
    # Descriptions plugins add to the query (the describe_query hook; the
    # query_model plugin's, written by a model: spec §2 row 11), each cut to
    # max_description_chars, at most max_query_descriptions of them; apidesc
    # recalls at most description_recall_limit definitions through them.
    max_query_descriptions: int = 8
    max_description_chars: int = 200
    description_recall_limit: int = 20
    # §3.2 recall; folders never searched or indexed: other people's code
    # (vendor/, node_modules/, third_party/, at any depth: django keeps jQuery
    # in .../static/admin/js/vendor/; C projects' deps/) and build output that
    # is committed (JavaScript's dist/, Rust's target/, minified bundles).
    exclude_globs: tuple[str, ...] = (
        "**/vendor/**", "**/node_modules/**", "site-packages/**", "**/third_party/**",
        "external/**", "deps/**", "build/**", ".git/**", "dist/**", "target/**", "*.min.js",
    )
    hits_per_term: int = 40
    apidesc_limit: int = 20
    callgraph_limit: int = 20
    bm25_recall_limit: int = 20
    # The two searches of the index (``bm25`` over each definition's own code,
    # ``apidesc`` over descriptions) score every definition holding any query
    # term: on 50,000 files, 350,000 of 400,000 rows a query, most for words
    # like "value" and "error". Each search keeps the query's rarest terms
    # while the definitions holding them (summed per term) stay within this
    # budget, always the rarest one; the more common terms, which weigh least
    # in BM25, are left out and named in an ``omitted`` diagnostic. On the
    # dev split 100,000 changed no metric (it binds on 16 django and sympy
    # tasks); 50,000 lost MRR and required-symbol recall (docs/benchmarks.md).
    search_postings_budget: int = 100_000
    traceback_limit: int = 20
    search_timeout_s: float = 10.0
    # The repository's own history (the ``history`` plugin): the newest
    # history_commits commits reachable from history_rev, from the
    # repository's git or from history_git_dir (the benchmark's way of giving
    # a tree the log of its base commit); the best history_top_commits
    # commits by message likeness vote for the files they changed.
    history_git_dir: str = ""
    history_rev: str = "HEAD"
    history_commits: int = 5000
    history_max_bytes: int = 16 * 1024 * 1024
    history_top_commits: int = 20
    history_weight: float = 0.3
    # The files that change with the ones the task names (same plugin): at
    # 0.5, file Acc@5 +0.01 but function Acc@10 -0.01 and irrelevant +0.007 on
    # the Python dev split, so 0 (not computed) by default.
    cochange_weight: float = 0.0
    # The file most of the repository's recent fixes update besides its code
    # (same plugin; a changelog, release notes), when at least changelog_share
    # of the newest CHANGELOG_COMMITS commits that changed code changed it, is
    # placed in the ranking as its placed_file_position-th file (0: off),
    # whatever the task: the change to make is often also an entry there.
    # Named in the ranking, not shown (ctx04_core/stages/place.py). Chosen on
    # the training tasks (docs/benchmarks.md, "The running changelog"): file
    # Acc@5 multilingual 0.525 -> 0.553, Loc-Bench sample 0.653 -> 0.694,
    # Python 0.757 -> 0.750 (its gold patches leave changelogs out).
    changelog_share: float = 0.15
    placed_file_position: int = 5
    # The first candidate's file's module (its own lines: imports, constants)
    # as the leading_module_rank-th candidate when not ranked before (0: off;
    # ctx04_core/stages/place.py): a fix changes module-level lines in a
    # quarter to a third of the tasks. Held out (docs/benchmarks.md, "The
    # leading file's module among the first ten"): function Acc@10 read with
    # containers as members, Python 0.411 -> 0.426, Loc-Bench 0.347 -> 0.388;
    # tenth, so that the first nine stay the ranking's. Past the fifth place
    # and up to it, a met file's class or module comes after the rest
    # (Loc-Bench 0.388 -> 0.418, "A met file's class or module after the rest"),
    # and it moves up, not into the first five, where containers read as their
    # members would push it past the tenth definition read (training Python
    # 0.443 -> 0.464, "The leading file's module where a reader meets it").
    leading_module_rank: int = 10
    # The definitions (functions, methods, classes) the best history commits
    # changed (same plugin): a scaling signal, and with a non-zero weight
    # their recall. At 0.5 against 0: Python dev function Acc@10 0.49 -> 0.53,
    # multilingual MRR 0.343 -> 0.400 (docs/benchmarks.md, "Step 5").
    history_definition_weight: float = 0.5
    # The meaning signal (the optional ``meaning`` plugin): which text
    # encoder ("wordllama", or "onnx" with the model folder meaning_model),
    # and how much the closest candidate's score is multiplied by (1 + weight).
    meaning_encoder: str = _from_env(MEANING_ENCODER_ENV, "wordllama")
    meaning_model: str = _from_env(MEANING_MODEL_ENV)
    meaning_weight: float = 2.0
    # Expansion after a first ranking: the members of the leading classes and
    # modules (the ``members`` plugin).
    members_ranks: int = 3
    members_limit: int = 30
    # And the definitions the first callee_ranks functions and methods call
    # (the ``callgraph`` plugin; names with at most four definitions), at most
    # callgraph_limit of them. Chosen held out on the training tasks (stop
    # 52's fold models; docs/benchmarks.md, "The leading functions' callees"):
    # at 1, 3, 5 Python line recall 0.486 -> 0.494, 0.512, 0.513, function
    # Acc@10 read 0.429 -> 0.432, 0.435, 0.432, MRR 0.415 -> 0.417, 0.422,
    # 0.419; multilingual line recall 0.393 -> 0.397, 0.394, 0.387. 0: none.
    callee_ranks: int = 3
    # The code that the tests a task names import and call (the ``tests``
    # plugin): at most tests_limit of them recalled, each scoring
    # x(1 + tested_boost / how many definitions outside tests share its name).
    tests_limit: int = 20
    tested_boost: float = 1.0
    # A one-hop call-graph neighbour of a definition the task names (the
    # ``callgraph`` plugin) scores x(1 + neighbour_boost / how many
    # definitions share that name). 0.5 won over 0 and 1 on the two dev
    # splits pooled (docs/benchmarks.md).
    neighbour_boost: float = 0.5
    # The optional ``dependence`` plugin's signal: x(1 + dependence_weight *
    # the share of a function flowing from what the task names). At 1 it
    # cost file Acc@1 0.48 -> 0.43 on the Python dev split; 0 computes nothing.
    dependence_weight: float = 0.0
    # §3.4 re-rank
    top_k: int = 20
    identifier_weight: float = 3.0
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # Evidence beside the §3.4 score, each measured on the dev split
    # (docs/benchmarks.md): idf over the whole repository, not the recalled
    # candidates; a definition the task names scores x(1 + boost / how many
    # definitions share the name); a file of tests, docs, examples or
    # benchmarks scores x auxiliary_weight; a place the task points at
    # (Candidate.pointed_at) scores x(1 + location_boost); a term of the goal
    # hint (the first sentence: an issue's title) weighs x goal_weight, and a
    # file whose path shares a word with it scores x(1 + path_boost).
    # repository_idf=False, definition_boost=0, auxiliary_weight=1,
    # location_boost=0, goal_weight=1 and path_boost=0 give the spec's score.
    # Any signal's weight by name (``history=0.5``), over the producing
    # plugin's default: how a third-party signal is tuned, or switched off
    # (``name=0``) without disabling the plugin's other hooks.
    signal_weights: tuple[str, ...] = ()
    # fusion "weighted" ranks by the fused score above; "learned" (issue 23)
    # by a ranking model's score of each candidate's features, the fused
    # score among them (ctx04_core/stages/fuse.py). ranking_model is the
    # model file, "" for the one shipped in ctx04_core/ranking/model.json;
    # a missing or unusable file falls back to "weighted", and says so in
    # an ``unavailable`` diagnostic. CTX04_FUSION and CTX04_RANKING_MODEL
    # give the defaults. "learned" is the default since stop 38; the model
    # shipped since stop 40 (a logistic regression, own-line labels), same
    # dev run against weighted: Python file@1 0.50 -> 0.52, file@5 0.80 ->
    # 0.78, function accuracy read as an agent reads @10 0.46 -> 0.50, MRR
    # 0.428 -> 0.435, line recall 0.523 -> 0.532, irrelevant share 0.792 ->
    # 0.780; multilingual file@1 0.375 -> 0.389, file@5 equal, fnr@10 0.222
    # -> 0.236, MRR 0.396 -> 0.420, file recall 0.725 -> 0.718; leave one
    # repository out on the training splits no figure more than 0.01 below
    # the weighted one's (docs/benchmarks.md).
    fusion: str = _from_env(FUSION_ENV, LEARNED)
    ranking_model: str = _from_env(RANKING_MODEL_ENV)
    # The weighted fusion's function-level order (issue 23): the first top_k
    # are chosen by the fused score, then ordered with each type's (class,
    # struct, enum, interface, trait, impl, namespace) score times
    # type_factor, so the methods a change is in can come before the type
    # holding them. Modules keep their score: a file's own lines (imports,
    # constants, a C header's declarations) are themselves where a change
    # lands (in a quarter of the Python training tasks). 1.0 keeps the fused
    # order. 0.8 was the best of 0.6-0.9 on the training tasks and raised or
    # held every recall metric of the dev A/B; discounting modules too lost
    # dev MRR (C, C++): docs/benchmarks.md.
    type_factor: float = 0.8
    repository_idf: bool = True
    definition_boost: float = 2.0
    auxiliary_weight: float = 0.15
    location_boost: float = 5.0
    goal_weight: float = 3.0
    path_boost: float = 0.25
    # A candidate in the file whose stem a report's title is tagged with
    # (``[Chaturbate] ...``, ``skipping: ...``) adds title_boost: to the
    # learned order's log-odds (the model reads no such feature; Loc-Bench's
    # held-out sample, the 30 tagged tasks: file@1 0.467 -> 0.700, line
    # recall 0.486 -> 0.527), or x(1 + title_boost) in the weighted order.
    title_boost: float = 2.0
    # §3.5 line prune. Measured on the dev split (docs/benchmarks.md): the
    # best-ranked function shown whole when it ranks in the first three, every
    # other definition as its signature alone, other candidates cut to their
    # best lines, and candidates under a fifth of the best candidate's best
    # line dropped lower the irrelevant ratio and tokens and show more gold
    # than the spec's 0.6 for all. A kept line inside a statement longer than
    # max_statement_lines brings only that statement's first line (a data
    # table, a template string): irrelevant 0.790 -> 0.773 Python, 0.853 ->
    # 0.849 multilingual, tokens -8 % and -13 %, every ranking metric equal.
    # slice_shape "value" (issue 22): the "signatures" slice (below), then
    # what is left of the budgets on whole bodies of the functions,
    # methods and types (a type: its own lines, and only as the first
    # candidate) among the first value_ranks or in the files of the first
    # value_files candidates whose fused score is at least
    # value_score_share of the best, in rank order, each only when it fits
    # beside everything already planned (ctx04_core/stages/value.py): the
    # slice names the same places and shows more of the lines to edit.
    # value_ranks and value_score_share were chosen on the training tasks
    # (docs/benchmarks.md, "Issue 22"); whole_body_max_lines caps a body
    # (None: only the budgets; a cap of 100 or 200 lines lost line recall
    # there, the long leading functions being where the changes are).
    # "signatures": the best function within whole_function_within whole,
    # every other definition as its signature when neighbours_as_signatures.
    # "value" is the default since issue 22's dev check: line recall 0.276 ->
    # 0.446 Python, 0.134 -> 0.202 multilingual, every ranking metric, file
    # and symbol recall equal, irrelevant 0.787 -> 0.800 and 0.810 -> 0.807,
    # tokens 1683 -> 2480 and 1525 -> 2037 of 4000 (the bounds:
    # irrelevant 0.80 / 0.85, the budget; spending it is the point). Types'
    # own lines as bodies (issue 22, step 3): line recall 0.446 -> 0.476 and
    # 0.202 -> 0.215, irrelevant 0.800 -> 0.796 and 0.807 -> 0.814, tokens
    # 2480 -> 2648 and 2037 -> 2369, every ranking metric equal. Bodies in
    # the first candidate's file past value_ranks (step 4): line recall
    # 0.476 -> 0.492 and 0.215 -> 0.215, irrelevant 0.796 -> 0.798 and
    # 0.814 -> 0.819. Step 6, chosen on the training tasks: the files of the
    # first three candidates lead (value_files; it was the first one's), and
    # a type's own lines are a body only when it ranks first (ranked 2-5 they
    # were 98 % irrelevant and held 1 % of the changed lines, Python): line
    # recall 0.492 -> 0.509 and 0.222 -> 0.229, irrelevant 0.798 -> 0.793
    # and 0.820 -> 0.808, tokens 2769 -> 2712 and 2503 -> 2306.
    slice_shape: str = VALUE
    value_ranks: int = 5
    value_files: int = 3
    value_score_share: float = 0.3
    whole_body_max_lines: int | None = None
    # Each of the first leader_ranks candidates that is a type of at most
    # type_span_max_lines lines is shown as its whole span, members too,
    # when that fits (members ranked below it keep their signatures, their
    # lines being shown there; one ranked above it keeps its body, left out
    # of the type's lines). A small class, a linter rule, a handler is the
    # unit the change goes in. 0: off. Chosen on 108 Python and 179 multilingual
    # training tasks (docs/benchmarks.md, "A small leading type shown
    # whole"): line recall 0.421 -> 0.429 and 0.305 -> 0.329, irrelevant
    # 0.795 -> 0.790 and 0.807 -> 0.809, every ranking metric equal; dev,
    # read once: line recall 0.513 -> 0.523 and 0.243 -> 0.243, irrelevant
    # 0.793 -> 0.791 and 0.794 -> 0.796.
    type_span_max_lines: int = 100
    # A slice in doubt (the learned order is not sure of its most probable
    # candidate: see sure_margin) then shows whole the ranked functions and methods whose
    # probability is at least doubt_floor, in rank order, each when it
    # fits. The irrelevant share is read per slice: one that misses every
    # changed line scores 1.0 however much it shows, so these bodies cost
    # precision only where the leaders were right, which their probability
    # says is unlikely. Chosen on the training tasks (docs/benchmarks.md,
    # "A slice in doubt"): line recall 0.440 -> 0.469 Python, 0.322 ->
    # 0.341 multilingual, irrelevant 0.807 -> 0.810 and 0.794 -> 0.796,
    # every ranking metric equal. The probabilities are the shipped
    # logistic model's; under the weighted fusion (no model score) the
    # slice is never in doubt. doubt_probability 0: off. The ranked
    # functions whose lines the prune's floor refused are weighed the same
    # way (stop 45: training line recall +0.009 Python, +0.010
    # multilingual).
    doubt_probability: float = 0.3
    # The learned order is sure of its most probable candidate when that one
    # holds a changed line with a probability of at least doubt_probability
    # and at least sure_margin times the next one's: two leaders alike mean
    # either may be wrong (1: the probability alone, as before stop 57, when
    # doubt_probability was 0.35). Chosen held out on the training tasks
    # (stop 52's fold models; docs/benchmarks.md, "Sure of a leader that
    # stands out"): line recall 0.470 -> 0.486 Python, 0.388 -> 0.395
    # multilingual, 0.522 -> 0.521 Loc-Bench; irrelevant 0.799 -> 0.801,
    # 0.786 -> 0.792, 0.675 -> 0.685; every ranking metric equal. Dev, read once:
    # line recall equal, irrelevant 0.790 -> 0.790 and 0.801 -> 0.803.
    sure_margin: float = 2.0
    # Nor is it sure when that candidate is a module (a file's
    # own lines, the best of its scattered hits): it is then sure of a file,
    # not of the lines to edit in it (fmt-2457: the header ranks first, the
    # methods to change were their signatures). Measured at stop 71
    # (docs/benchmarks.md, "A module leading: a slice in doubt"): line recall
    # 0.379 -> 0.385 dev multilingual, 0.553 -> 0.553 and 0.438 -> 0.438
    # training, dev Python and Loc-Bench equal; 3 tasks up, none down, 11 of
    # 863 slices changed; irrelevant share +0.000 to +0.002. False: off.
    doubt_module_leader: bool = True
    doubt_floor: float = 0.03
    # Last, in doubt, the functions and methods the learned order placed past
    # top_k, in the files the slice shows, whose probability is at least
    # doubt_pool_floor, whole, in its order, each when it fits: the function
    # to change is often a sibling of the one that ranked. Chosen on the
    # training tasks (docs/benchmarks.md, "Siblings past top_k"): at 0.02,
    # 0.01, 0.005 multilingual line recall 0.341 -> 0.351, 0.369, 0.375,
    # irrelevant 0.796 -> 0.800, 0.807, 0.813; Python 0.469 -> 0.469, 0.473,
    # 0.482, irrelevant 0.810 -> 0.811, 0.817, 0.824. 1: off.
    doubt_pool_floor: float = 0.01
    # Where the learned order is sure of a candidate (one has a probability
    # of at least doubt_probability), a function or method it gives less
    # than sure_floor shows its signature only, whatever its rank or score
    # share: 2 % of the lines it leaves out on the training tasks were
    # relevant. Chosen on the training tasks held out (docs/benchmarks.md,
    # "A sure slice leaves improbable bodies out"): irrelevant share 0.808
    # -> 0.798 Python, 0.808 -> 0.802 multilingual, 0.713 -> 0.709
    # Loc-Bench, line recall 0.477 -> 0.474, equal, equal; dev, read once:
    # 0.793 -> 0.790 and 0.811 -> 0.805, line recall equal. 0: off.
    sure_floor: float = 0.1
    # Last, in doubt, the head of the first candidate's file (its lines before
    # its first definition: imports, constants, docstring), less the lines
    # shown, when it fits: a fix often adds an import or changes a constant,
    # and the leading file is the likeliest changed one. Chosen on the
    # training tasks (docs/benchmarks.md, "The leading file's head"): line
    # recall 0.473 -> 0.497 Python, 0.369 -> 0.378 multilingual, irrelevant
    # 0.817 -> 0.809 and 0.807 -> 0.807; dev, read once: 0.567 -> 0.569 and
    # 0.277 -> 0.283, irrelevant 0.790 -> 0.795 and 0.796 -> 0.797. False: off.
    doubt_head: bool = True
    # Last of all, in doubt, the ranked functions and methods that a recall
    # source found a task's term in (their hit lines) and that the learned
    # order gives at least doubt_hit_floor, whole, in rank order, each when
    # it fits: below doubt_floor, a body the task's words reach still holds
    # the change often enough for the room the slice has left, once every
    # other rule has had it (stop 45: the same floor lowered for every
    # ranked body took the room of the siblings and the head, and lost).
    # Measured at stop 75 (docs/benchmarks.md, "Matched bodies last in a
    # slice in doubt"): at 0.02, line recall 0.3849 -> 0.3953 dev
    # multilingual, 0.5534 -> 0.5545 and 0.4383 -> 0.4443 training, 0.5279
    # -> 0.5291 Loc-Bench breadth, dev Python and the other Loc-Bench sets
    # equal; 6 tasks up over seven sets, none down; irrelevant share +0.0004
    # to +0.0023. At 0.01, dev Python 0.6357 -> 0.6419 too, 9 tasks up, none
    # down, but the irrelevant share +0.0021 to +0.0103. 0: off.
    doubt_hit_floor: float = 0.02
    # Otherwise (a slice the learned order is sure of, or the weighted fusion's),
    # the head's import lines alone (those the index records an import on),
    # when the file has at most leading_imports_max of them before its first
    # definition: a short import block costs a few lines and a fix often adds
    # an import to it; a long one is mostly imports the fix does not touch
    # (the whole head in every slice cost 0.01 of irrelevant share at stop
    # 60). Measured at stop 64
    # (docs/benchmarks.md, "The leading file's imports when they are few"): at
    # 10, line recall 0.621 -> 0.621 dev Python, 0.373 -> 0.379 dev
    # multilingual, 0.607 -> 0.609 and 0.418 -> 0.419 training, 0.582 ->
    # 0.585 and 0.526 -> 0.527 Loc-Bench, 7 tasks up, none down, irrelevant
    # share +0.000 to +0.002; at 15 the same but one task, for up to +0.004.
    # 0: off.
    leading_imports_max: int = 10
    # Then each function or method the slice shows in another form (its
    # signature, its best lines) and of at most short_function_lines lines is
    # shown whole, in rank order, when the difference fits, whatever its rank,
    # score share or probability: its body costs a line or four more than its
    # signature, which says little of what it does and hides a change in it.
    # Measured at stop 71 (docs/benchmarks.md, "Short functions
    # whole"): line recall 0.621 -> 0.636 dev Python, 0.379 -> 0.379 dev
    # multilingual, 0.550 -> 0.553 and 0.432 -> 0.438 training, Loc-Bench
    # equal; 6 tasks up, none down, every ranking equal; irrelevant share
    # +0.000 to +0.005. At 8 lines dev Python's passes its 0.80 bound. 0: off.
    short_function_lines: int = 5
    # Last, every excerpt also shows the blank lines right after each run of
    # its lines, and before each run of at least BLANK_BEFORE_RUN lines
    # (a body), that no excerpt shows, when they fit: a fix that adds a
    # function, a method or a block puts it there, and the gold reads a pure
    # insertion as the line before it, a blank line more often than not.
    # "\n\n" is one token: they cost next to nothing. Measured at stop 63
    # (docs/benchmarks.md, "Blank lines at the ends of the runs shown"): line
    # recall 0.591 -> 0.612 dev Python, 0.347 -> 0.351 dev multilingual,
    # 0.576 -> 0.596 and 0.404 -> 0.407 training, 0.555 -> 0.568 and 0.506 ->
    # 0.509 Loc-Bench, no task down; irrelevant share within 0.003 either
    # way; every ranking metric equal. Only the value slice. False: off.
    blank_line_ends: bool = True
    # Then the first candidate's excerpt shows first_run_context lines either
    # side of each run of its lines (a body, its best lines, a type's or a
    # module's own lines), all of them when they fit, else run by run in file
    # order: the change is often just outside what matched the task, and the
    # first candidate is the likeliest to hold it. Measured at stop 63
    # (docs/benchmarks.md, "The first candidate's runs with three lines either
    # side"), over blank_line_ends: line recall 0.612 -> 0.616 dev Python,
    # 0.351 -> 0.368 dev multilingual, 0.596 -> 0.607 and 0.407 -> 0.417
    # training, 0.568 -> 0.572 and 0.509 -> 0.526 Loc-Bench, no task down;
    # irrelevant share -0.003 to +0.002; 15 to 98 tokens more. 0: off.
    first_run_context: int = 3
    # So does each later candidate whose probability of holding a changed line
    # is at least run_context_floor (the learned order's; under the weighted
    # fusion only the first), in rank order, after every excerpt's blank lines,
    # when it fits: a second candidate the order finds as likely as a sure
    # slice's bodies (sure_floor) is as likely to hold a change beside its
    # runs. Measured at stop 64 (docs/benchmarks.md, "A probable candidate's
    # runs with three lines either side"): line recall 0.616 -> 0.621 dev
    # Python, 0.368 -> 0.373 dev multilingual, 0.607 -> 0.607 and 0.417 ->
    # 0.418 training, 0.572 -> 0.582 and 0.526 -> 0.526 Loc-Bench, 7 tasks up,
    # none down; irrelevant share +0.001 to +0.005. 0: the first only.
    run_context_floor: float = 0.1
    # Then each of the first leader_ranks candidates cut to its best lines (a
    # body too long for the budget, a module's own lines) shows its lines
    # scoring at least leader_line_ratio of its best line, each with
    # leader_line_context lines either side, when that fits: the change is
    # often a few lines from a matching line. 0 ranks: off. Chosen on
    # 108 Python and 179 multilingual training tasks (docs/benchmarks.md,
    # "Leaders' lines with their neighbours"); dev, read once: line recall
    # 0.513 -> 0.513 Python, 0.229 -> 0.243 multilingual, irrelevant 0.793
    # -> 0.793 and 0.809 -> 0.790, every ranking metric equal. A leader whose
    # body the score share wants but does not fit grows the same way, or
    # shows its best lines; the leaders are exempt from prune_relative_floor
    # (stop 59; docs/benchmarks.md, "Leaders: past the relative floor, and
    # too long for a body"). Five, not three, since stop 60, read on three
    # training sets: line recall 0.538 -> 0.537 (100 Python, 1 down), 0.400
    # -> 0.404 (179 multilingual, 5 up), 0.504 -> 0.506 (78 Loc-Bench tasks
    # of 50 repositories outside SWE-bench, 3 up); dev, the check: 0.566 ->
    # 0.584 Python, 0.330 -> 0.335 multilingual, irrelevant 0.792 -> 0.791
    # and 0.784 -> 0.795 ("Five leaders", docs/benchmarks.md).
    leader_ranks: int = 5
    leader_line_ratio: float = 0.5
    leader_line_context: int = 2
    prune_ratio: float = 1.0
    whole_function_within: int = 3
    neighbours_as_signatures: bool = True
    prune_floor: float = 1e-3
    prune_relative_floor: float = 0.2
    max_statement_lines: int = 8
    # The signatures of definitions a shown line calls (the called_definitions
    # hook, spec §3.5 rule 3), shown after the ranked entries: at most this many.
    call_signatures_limit: int = 8
    # §3.6 token cap
    budget_tokens: int = 4000
    # §3.7 vetting (plugins/vet has the measure exactly). An artifact
    # reproduces a retrieved block when more than vet_overlap_threshold of
    # its tokens are the block's (a bare copy), or when it holds more than
    # that share of the block's tokens as one contiguous run (a copy under
    # the block's heading or wrapped in other text), for a block of at least
    # vet_min_block_tokens tokens: a signature alone (10 to 30 tokens) is
    # what an override or a rewrite of that function restates. An artifact
    # over vet_max_artifact_bytes (UTF-8) is refused, not vetted, and the CLI
    # reads no more of it: a 50 MB one took 726 MB to vet. 1 MiB is the
    # largest source file ctx04 reads (max_file_bytes) and far more than a
    # model writes in one answer.
    vet_overlap_threshold: float = 0.9
    vet_min_block_tokens: int = 40
    vet_max_artifact_bytes: int = 1024 * 1024
    # Evidence budgets (repository-source-references). A file over
    # max_file_bytes is excluded whole, never read as a prefix; a shown line is
    # cut to max_line_bytes at a UTF-8 boundary. The block cap lets the token
    # cap bind on ordinary code (about 4 bytes a token) and stops text that
    # tokenizes densely; headings (references) have their own budget.
    max_file_bytes: int = 1024 * 1024
    max_line_bytes: int = 160
    max_block_bytes: int = 16 * 1024
    max_reference_bytes: int = 4 * 1024
    # What parsing one file may cost (ctx04_core/parse_budget.py), for every
    # parser: a file whose syntax tree is deeper than parse_max_depth levels,
    # or not parsed within parse_deadline_s, is indexed as "too_complex" (no
    # definitions; still searched and shown as lines). Walking a tree costs
    # its depth at every step: 20,000 nested blocks (40,000 levels) took a
    # tree-sitter parser minutes. Ordinary code is 20 to 80 levels deep, a
    # chain of 1,000 method calls 2,000; CPython refuses 200 nested brackets
    # itself. An 800 KB JavaScript file of ordinary code parses in 2 s.
    parse_max_depth: int = 4096
    parse_deadline_s: float = 10.0
    # Limits the compact profile sets; None means only the budgets above apply.
    max_search_terms: int | None = None
    max_paths: int | None = None
    max_quoted_lines: int | None = None
    max_quoted_bytes: int | None = None
    # The model client (ctx04_core/model.py) and the decision door (the
    # ``door`` plugin). No URL or no model name: nothing is asked and the
    # output is what it is without a door. model_url is the OpenAI-compatible
    # base URL (".../v1"); the API key is read from the environment variable
    # model_api_key_env names, never from a file or a setting. A "hosted"
    # model is sent at most what a read already admitted; a "local" one also
    # the digests of read excerpts the budgets cut (the door's bound policy).
    # Each call has model_timeout_s in all, at most model_max_output_tokens
    # of answer and model_max_response_bytes of HTTP body; the USD prices per
    # million tokens give the eval's cost estimate.
    model_url: str = _from_env(MODEL_URL_ENV)
    model: str = _from_env(MODEL_ENV)
    model_api_key_env: str = "CTX04_MODEL_API_KEY"
    model_locality: str = _from_env(MODEL_LOCALITY_ENV, "hosted")
    model_timeout_s: float = 20.0
    model_max_output_tokens: int = 1024
    model_max_response_bytes: int = 256 * 1024
    model_structured_output: bool = True  # JSON-schema response_format; off for servers without
    model_usd_per_mtok_input: float = 0.0
    model_usd_per_mtok_output: float = 0.0
    door_cache_entries: int = 256  # rankings kept in the index database
    # The query_model plugin asks the model for descriptions of the functions
    # the change will call or touch. That sends the task text: to a "local"
    # model always, to a "hosted" one only when hosted_model_sees_task is on
    # (off by default; a repository's own file cannot set it). Its call gets
    # at most model_query_timeout_s (and never more than model_timeout_s): it
    # runs before recall, on every retrieval's path.
    hosted_model_sees_task: bool = False
    model_query_timeout_s: float = 10.0
    model_query_cache_entries: int = 256  # answers kept in the index database

    def __post_init__(self) -> None:
        self.signal_weight_overrides()  # a malformed entry fails here, not mid-retrieval
        if self.slice_shape not in SLICE_SHAPES:
            raise SettingsError(
                f"slice_shape is one of {', '.join(SLICE_SHAPES)}, not {self.slice_shape!r}"
            )
        if self.fusion not in FUSIONS:
            raise SettingsError(
                f"fusion ({FUSION_ENV}) is one of {', '.join(FUSIONS)}, not {self.fusion!r}"
            )
        if not 0 < self.type_factor <= 1:
            raise SettingsError(
                f"type_factor is a share of a type's score, in (0, 1], "
                f"not {self.type_factor!r}"
            )
        if not 0 < self.leader_line_ratio <= 1:
            raise SettingsError(
                f"leader_line_ratio is a share of a candidate's best line score, in (0, 1], "
                f"not {self.leader_line_ratio!r}"
            )
        if self.leading_module_rank < 0:
            raise SettingsError(
                f"leading_module_rank is a rank, 0 (off) or more, not {self.leading_module_rank!r}"
            )
        if not 0 < self.changelog_share <= 1 or self.placed_file_position < 0:
            raise SettingsError(
                f"changelog_share is a share of commits, in (0, 1], and placed_file_position "
                f"a count, 0 or more; not {self.changelog_share!r}, {self.placed_file_position!r}"
            )
        doubts = (self.doubt_probability, self.doubt_floor, self.doubt_pool_floor,
                  self.sure_floor, self.run_context_floor, self.doubt_hit_floor)
        if not all(0 <= p <= 1 for p in doubts):
            raise SettingsError(
                f"doubt_probability, doubt_floor, doubt_pool_floor, sure_floor, "
                f"run_context_floor and doubt_hit_floor are probabilities, in [0, 1], not "
                f"{', '.join(map(repr, doubts))}"
            )
        if not self.sure_margin >= 1:  # NaN too
            raise SettingsError(
                f"sure_margin is how many times the next candidate's probability the "
                f"first's must be, 1 or more, not {self.sure_margin!r}"
            )
        counts = (self.leader_ranks, self.leader_line_context, self.type_span_max_lines,
                  self.first_run_context, self.leading_imports_max, self.short_function_lines)
        if min(counts) < 0:
            raise SettingsError(
                "leader_ranks, leader_line_context, type_span_max_lines, first_run_context, "
                "leading_imports_max and short_function_lines are counts, 0 or more"
            )
        if self.model_locality not in LOCALITIES:
            raise SettingsError(
                f"model_locality ({MODEL_LOCALITY_ENV}) is one of {', '.join(LOCALITIES)}, "
                f"not {self.model_locality!r}"
            )

    @classmethod
    def compact(cls, **overrides: Any) -> Settings:
        """The source-references document's budgets exactly: 4 search terms,
        8 paths, 10 lines, 2 KiB of quoted text, an 8 KiB block."""
        return cls(**COMPACT_PROFILE).with_overrides(**overrides)

    def with_assignments(self, assignments: list[str]) -> Settings:
        """Apply ``NAME=VALUE`` strings (the CLI's ``--set``), each parsed like its default."""
        return self.with_overrides(**self.assigned(assignments))

    def assigned(self, assignments: list[str]) -> dict[str, Any]:
        """``NAME=VALUE`` strings as the overrides they name, each value parsed."""
        overrides: dict[str, Any] = {}
        for assignment in assignments:
            name, sep, raw = assignment.partition("=")
            if not sep or name.strip() not in SETTING_NAMES:
                raise SettingsError(
                    f"--set takes NAME=VALUE with a known setting, not {assignment!r}"
                )
            overrides[name.strip()] = self.parsed(name.strip(), raw.strip())
        return overrides

    def parsed(self, name: str, raw: str) -> object:
        """``raw`` as setting ``name``'s type (that of its value here); limits
        whose value is None take ints. A SettingsError names the setting."""
        current = getattr(self, name)
        if isinstance(current, str):  # a URL or a name: taken as written
            return raw
        if raw.lower() == "none":
            return None
        if isinstance(current, bool):
            if raw.lower() not in _BOOLEANS:
                raise SettingsError(f"{name} is true or false, not {raw!r}")
            return _BOOLEANS[raw.lower()]
        if isinstance(current, tuple):
            return tuple(item.strip() for item in raw.split(",") if item.strip())
        try:
            return float(raw) if isinstance(current, float) else int(raw)
        except ValueError:
            kind = "a number" if isinstance(current, float) else "an integer"
            raise SettingsError(f"{name} is {kind}, not {raw!r}") from None

    def signal_weight_overrides(self) -> dict[str, float]:
        """``signal_weights`` as a mapping; a malformed entry is a ValueError."""
        weights = {}
        for entry in self.signal_weights:
            name, sep, raw = entry.partition("=")
            try:
                weights[name.strip()] = float(raw)
            except ValueError:
                sep = ""
            if not sep or not name.strip():
                raise ValueError(f"signal_weights takes NAME=NUMBER entries, not {entry!r}")
        return weights

    def signal_weight(self, name: str, default: float) -> float:
        """The weight the fusion gives signal ``name``: its ``signal_weights``
        entry, else ``default``. A plugin skips a signal this makes 0."""
        return self.signal_weight_overrides().get(name, default)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def with_overrides(self, **overrides: Any) -> Settings:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(unknown)}")
        return replace(self, **overrides)


SETTING_NAMES = frozenset(f.name for f in fields(Settings))
# Settings.compact's budgets, also what ``--profile compact`` sets on the command line.
COMPACT_PROFILE: dict[str, Any] = {
    "max_search_terms": 4, "max_paths": 8, "max_quoted_lines": 10,
    "max_quoted_bytes": 2 * 1024, "max_block_bytes": 8 * 1024, "max_reference_bytes": 2 * 1024,
}
_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
