"""What the ranking signals and the expansion cost a warm retrieval.

    .venv/bin/python benchmarks/bench_signals.py --repo django [--runs 5]

Per repository (pinned tree, warm index as in ``bench_query.py``), for each
of the 10 fixed tasks, the in-process API ``retrieve`` under these plugin
sets, measured in the same process one after the other:

- before: the stages of the session that started issue 11 (``members``,
  ``history``, ``tests`` and ``meaning`` disabled, no ``neighbour`` signal);
- signatures: what ``requirements.txt`` installs (``meaning`` disabled) with
  ``slice_shape = "signatures"`` and ``fusion = "weighted"``, the slice and
  the order before issues 22 and 23;
- weighted: the same with the default slice (``"value"``: whole bodies near
  the best score added where they fit), ranked by the weighted fusion;
- never in doubt: the same ranked by the default fusion (``"learned"``, the
  shipped ranking model), with the slice's doubt off
  (``doubt_probability = 0``: no bodies added where the leaders are improbable;
  ``sure_floor = 0``: none left out where they are probable);
- no siblings: the doubt on, without the functions past ``top_k`` in the
  slice's files (``doubt_pool_floor = 1``);
- no head: with them, without the leading file's head (``doubt_head = False``);
- no changelog: with the head, without the running changelog placed in the
  ranking (``placed_file_position = 0``);
- no leading module: with the changelog, without the leading file's module
  placed among the first ten (``leading_module_rank = 0``);
- probability alone: with the module, the doubt gate as before stop 57 (a
  leader at 0.35 sure however close the next: ``doubt_probability = 0.35``,
  ``sure_margin = 1``);
- no callees: with the margin, without the definitions the leading
  functions call proposed after the first ranking (``callee_ranks = 0``);
- three leaders: with the callees, the slice's leaders as before stop 60
  (``leader_ranks = 3``);
- no short functions: with five leaders, the functions of at most
  ``short_function_lines`` lines left as the slice's rules show them
  (``short_function_lines = 0``);
- no matched bodies: with them, without the functions a task's term was
  found in shown whole last in a slice in doubt (``doubt_hit_floor = 0``);
- default: the same with them whole (the default);
- + meaning: the default install and the optional ``meaning`` plugin, whose
  vectors are read from the index (made when it is built with the plugin
  enabled, or by the untimed warm-up for an index built without it).

The tree has no ``.git``: the history plugin reads the mirror's log from the
pinned commit back (``history_git_dir``, ``history_rev``), as ``ctx04 eval``
does, so its cost is in the figures; the log is parsed once per process and
kept in the index, as in any warm process. Each figure is a median over
``--runs`` timed runs after one untimed warm-up; the ratios are against
"before" in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from functools import partial

import benchlib as bl

from ctx04_core.pipeline import open_repo, retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings

# name: (disabled plugins, setting overrides)
PLUGIN_SETS: dict[str, tuple[tuple[str, ...], dict[str, object]]] = {
    "before": (
        ("pin", "members", "history", "meaning", "tests", "dependence"),
        {"neighbour_boost": 0.0, "fusion": "weighted"},
    ),
    "signatures": (
        ("pin", "meaning", "dependence"), {"slice_shape": "signatures", "fusion": "weighted"}
    ),
    "weighted": (("pin", "meaning", "dependence"), {"fusion": "weighted"}),
    "never in doubt": (("pin", "meaning", "dependence"),
                       {"doubt_probability": 0.0, "sure_floor": 0.0}),
    "no siblings": (("pin", "meaning", "dependence"), {"doubt_pool_floor": 1.0}),
    "no head": (("pin", "meaning", "dependence"), {"doubt_head": False}),
    "no changelog": (("pin", "meaning", "dependence"), {"placed_file_position": 0}),
    "no leading module": (("pin", "meaning", "dependence"), {"leading_module_rank": 0}),
    "probability alone": (("pin", "meaning", "dependence"),
                          {"doubt_probability": 0.35, "sure_margin": 1.0}),
    "no callees": (("pin", "meaning", "dependence"), {"callee_ranks": 0}),
    "three leaders": (("pin", "meaning", "dependence"), {"leader_ranks": 3}),
    "no short functions": (("pin", "meaning", "dependence"), {"short_function_lines": 0}),
    "no matched bodies": (("pin", "meaning", "dependence"), {"doubt_hit_floor": 0.0}),
    "default": (("pin", "meaning", "dependence"), {}),
    "+ meaning": (("pin", "dependence"), {}),
}


def measure(spec: bl.RepoSpec, args: argparse.Namespace) -> list[list[str]]:
    tree = bl.materialise(spec, args.cache_dir, args.mirror_dir)
    index_dir = args.cache_dir / "index" / spec.tag
    repo, _ = open_repo(tree, plugin_manager(), Settings(), index_dir)
    repo.index.close()
    settings = Settings(
        history_git_dir=str(bl.git_dir(spec, args.mirror_dir)), history_rev=spec.commit
    )
    per_set: dict[str, list[float]] = {name: [] for name in PLUGIN_SETS}
    for task in spec.tasks:
        line = []
        for name, (disabled, overrides) in PLUGIN_SETS.items():
            run = partial(retrieve, task.text, tree, settings=settings.with_overrides(**overrides),
                          disable=disabled, index_dir=index_dir)
            stats = bl.sample(run, args.runs)
            per_set[name].append(stats.median)
            line.append(f"{name} {bl.seconds(stats.median)}")
        print(f"  {task.id}: " + ", ".join(line), file=sys.stderr, flush=True)
    base = statistics.median(per_set["before"])
    return [
        [name, bl.seconds(statistics.median(values)),
         bl.ratio(statistics.median(values), base)]
        for name, values in per_set.items()
    ]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    bl.add_common_args(parser, default_repos="django")
    args = parser.parse_args(argv)
    bl.print_header("ctx04 signals benchmark", ["bench_signals.py", *argv])
    for spec in bl.chosen_specs(args):
        rows = measure(spec, args)
        print(f"### {spec.name} @ {spec.commit[:12]}: warm API retrieve, median over "
              f"{len(spec.tasks)} tasks of per-task medians ({args.runs} runs each)\n")
        print(bl.markdown_table(["plugins", "API", "ratio to before"], rows) + "\n", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
    print(f"At the end: {bl.load_line()}.")
