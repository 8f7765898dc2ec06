#!/usr/bin/env bash
# The main job on the built-in default: evaluate every example module with hloref and
# check each against XLA:CPU on the same seeded inputs, then a short fixed-seed fuzz
# campaign against XLA:CPU (findings, if any, in fuzz-main/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh fuzz   # the XLA:CPU oracle and Hypothesis only (no TensorFlow, GPU, Ray)
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$PWD/.numba_cache}"
.venv/bin/python ci/examples_vs_xla.py "$@"
status=0
OUT=fuzz-main EXAMPLES=${EXAMPLES:-100} SEED=${SEED:-0} bash ci/fuzz_smoke.sh || status=$?
[ "$status" -ne 2 ] || exit 2
exit 0
