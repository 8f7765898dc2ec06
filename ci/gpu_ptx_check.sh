#!/usr/bin/env bash
# Compile every kernel the GPU tests launch to PTX for sm_80, without a GPU
# (ci/gpu_ptx_check.py says how). The tests' assertions fail by design in this mode
# (kernels do not run); the exit status is the compile tally's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
OUT="$(mktemp -d)"
NUMBA_ENABLE_CUDASIM=0 GPU_PTX_OUT="$OUT/ptx.json" PYTHONPATH="ci${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m pytest tests/gpu -q -p gpu_ptx_check -p no:cacheprovider -W ignore "$@" > "$OUT/pytest.log" 2>&1
if [ ! -s "$OUT/ptx.json" ]; then
  echo "gpu_ptx_check: the test run wrote no tally; its log:"; tail -40 "$OUT/pytest.log"; exit 1
fi
"$PY" ci/gpu_ptx_check.py "$OUT/ptx.json"
