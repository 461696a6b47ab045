"""Warm retrieval with the default settings against a baseline of other values, in one process.

    .venv/bin/python benchmarks/bench_settings_ab.py --repo django \\
        --baseline blank_line_ends=false --baseline first_run_context=0 [--runs 4]

For each of the repository's 10 fixed tasks (the pinned tree and warm index
``bench_query.py`` uses), ``retrieve`` runs once with each side untimed,
then ``--runs`` times each, the two sides alternating so that the machine's
load falls on both alike. Reported per task and over the tasks: each side's
median wall time and their ratio (defaults / baseline). What a setting's
cost is, measured beside its own baseline rather than against a run at
another hour.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import benchlib as bl
from bench_query import warm_index

from ctx04_core.pipeline import retrieve
from ctx04_core.settings import Settings


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    bl.add_common_args(parser, default_repos="django")
    parser.add_argument(
        "--baseline", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the baseline side (repeatable); the other side has the defaults",
    )
    args = parser.parse_args(argv)
    baseline = Settings().with_assignments(args.baseline)
    sides = {"baseline": baseline, "defaults": Settings()}
    bl.print_header("ctx04 settings A/B", ["bench_settings_ab.py", *argv])
    for spec in bl.chosen_specs(args):
        tree, index_dir, files = warm_index(spec, args)
        print(bl.repo_heading(spec, tree, files))
        rows, medians = [], {name: [] for name in sides}
        for task in spec.tasks:
            times: dict[str, list[float]] = {name: [] for name in sides}
            for settings in sides.values():
                retrieve(task.text, tree, settings=settings, index_dir=index_dir)
            for _ in range(args.runs):
                for name, settings in sides.items():
                    start = time.perf_counter()
                    retrieve(task.text, tree, settings=settings, index_dir=index_dir)
                    times[name].append(time.perf_counter() - start)
            median = {name: statistics.median(t) for name, t in times.items()}
            for name in sides:
                medians[name].append(median[name])
            rows.append([task.id, bl.seconds(median["baseline"]), bl.seconds(median["defaults"]),
                         bl.ratio(median["defaults"], median["baseline"])])
        ratios = [d / b for b, d in zip(medians["baseline"], medians["defaults"], strict=True)]
        rows.append(["**median over tasks**", bl.seconds(statistics.median(medians["baseline"])),
                     bl.seconds(statistics.median(medians["defaults"])),
                     f"{statistics.median(ratios):.3f}× (median of the ratios)"])
        print(bl.markdown_table(["task", "baseline", "defaults", "defaults / baseline"], rows))


if __name__ == "__main__":
    main(sys.argv[1:])
