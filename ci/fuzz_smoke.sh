#!/usr/bin/env bash
# Short fixed-seed fuzz campaign for pull requests (about a minute on 2 cores).
# Exit status: 0 no new finding, 1 new findings (written to $OUT), 2 usage/setup error.
# Programs are compiled by XLA in batches of BATCH (a part that differs is confirmed
# alone); BATCH=1 compiles each alone.
#   OUT=fuzz-smoke EXAMPLES=40 SEED=0 BATCH=16 ci/fuzz_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${OUT:-fuzz-smoke}
EXAMPLES=${EXAMPLES:-40}
SEED=${SEED:-0}
BATCH=${BATCH:-16}
rm -rf "$OUT"   # a fresh directory: every finding of this run is new
exec "$PY" -m hloref fuzz --examples "$EXAMPLES" --seed "$SEED" --oracle xla --workers 1 \
    --batch "$BATCH" --out "$OUT" --json-summary "$OUT/summary.json" --junit "$OUT/junit.xml" --no-blame "$@"
