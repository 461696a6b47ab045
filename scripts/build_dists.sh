#!/usr/bin/env bash
# Build the wheel and sdist of every distribution (the core and each plugins/*)
# into one wheelhouse: bash scripts/build_dists.sh [OUTDIR] (default: dist/).
# `pip install --find-links OUTDIR ctx04` then installs the default set from it.
#
# Without build isolation: the running Python must have build and
# setuptools>=77 (the dev requirements install both; build says what is
# missing). Thirteen isolated builds cost a minute; these cost seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
outdir=$(realpath -m "${1:-dist}")

for project in . plugins/*/; do
    # build reports each step even when quiet: shown only when it fails.
    if ! log=$(python3 -m build --no-isolation --outdir "$outdir" "$project" 2>&1); then
        printf '%s\n' "$log" >&2
        exit 1
    fi
done
ls "$outdir"
