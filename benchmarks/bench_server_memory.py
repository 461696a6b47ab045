"""Memory of one ``ctx04 mcp`` server answering many queries over several repositories.

    .venv/bin/python benchmarks/bench_server_memory.py [--repo all] [--queries 100]

One server is started with ``--repo`` for each chosen repository (pinned
trees as the other scripts use them; its indexes in ``CACHE/server-cache``,
built on the first run and warm after). Query ``i`` goes to repository ``i mod
R`` with that repository's task ``(i div R) mod 10``, through the MCP SDK's
client over stdio. After each answer the server's resident set size (VmRSS)
and its peak so far (VmHWM) are read from ``/proc``.

Targets (issue 13): peak ≤ 500 MB after 100 queries over 4 repositories, and
no growth after the first 20.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import benchlib as bl
import serverlib

CHECKPOINTS = (1, 10, 20, 40, 60, 80, 100)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    bl.add_common_args(parser, default_repos="all")
    parser.add_argument("--queries", type=int, default=100, help="queries in all (default 100)")
    args = parser.parse_args(argv)
    specs = bl.chosen_specs(args)
    bl.print_header("ctx04 mcp server memory", ["bench_server_memory.py", *argv])
    trees = [bl.materialise(spec, args.cache_dir, args.mirror_dir) for spec in specs]
    # The server's indexes go to a cache of the benchmark's, not the user's.
    os.environ["XDG_CACHE_HOME"] = str(args.cache_dir / "server-cache")
    rss: list[int] = []
    seconds: list[float] = []
    with serverlib.running(trees) as server:
        started_rss, _ = server.memory()
        for i in range(args.queries):
            spec, tree = specs[i % len(specs)], trees[i % len(specs)]
            task = spec.tasks[(i // len(specs)) % len(spec.tasks)]
            started = time.perf_counter()
            server.retrieve(task.text, tree)
            seconds.append(time.perf_counter() - started)
            now, peak = server.memory()
            rss.append(now)
            print(f"  {i + 1:3d} {spec.name:8s} {task.id:28s} {bl.seconds(seconds[-1]):>9s} "
                  f"RSS {bl.mib(now)} (peak {bl.mib(peak)})", file=sys.stderr, flush=True)
        _, peak = server.memory()
    names = ", ".join(spec.name for spec in specs)
    print(f"### One server, {args.queries} queries over {len(specs)} repositories ({names})\n")
    rows = [["server started (before the first query)", bl.mib(started_rss), ""]]
    for n in (c for c in CHECKPOINTS if c <= len(rss)):
        rows.append([f"after query {n}", bl.mib(rss[n - 1]),
                     bl.seconds(sorted(seconds[:n])[(n - 1) // 2])])
    print(bl.markdown_table(["when", "RSS", "median query time so far"], rows))
    print()
    settled = rss[19] if len(rss) >= 20 else rss[-1]
    after = rss[20:] or [settled]
    print(bl.markdown_table(
        ["figure", "value", "target"],
        [["peak RSS (VmHWM) over the whole run", bl.mib(peak), "≤ 500 MB"],
         ["RSS after query 20", bl.mib(settled), ""],
         ["highest RSS after query 20", bl.mib(max(after)), ""],
         ["growth from query 20 to the end", bl.mib(rss[-1] - settled), "none"]],
    ))
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
    print(f"At the end: {bl.load_line()}.")
