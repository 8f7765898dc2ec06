#!/usr/bin/env bash
# The test suite: CPU tests (against XLA:CPU, TensorFlow, ml_dtypes, numpy), then the
# GPU backend's tests under the CUDA simulator in their own process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$PWD/.numba_cache}"
export PYTHONHASHSEED=0
.venv/bin/python -m pytest -q -p no:cacheprovider --ignore=tests/gpu tests "$@"
if [ -d tests/gpu ]; then
  bash ci/run_gpu_sim_tests.sh
  bash ci/gpu_ptx_check.sh   # the same kernels compiled to PTX for sm_80 (no GPU needed)
fi
