#!/usr/bin/env bash
# The main job on the built-in default: evaluate every example module with hloref,
# check each against XLA:CPU on the same seeded inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$PWD/.numba_cache}"
.venv/bin/python ci/examples_vs_xla.py "$@"
