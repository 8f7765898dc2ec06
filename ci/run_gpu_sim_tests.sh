#!/usr/bin/env bash
# The GPU backend's tests in numba's CUDA simulator (no GPU needed), in their own
# pytest process: the simulator must be enabled before numba.cuda is first imported.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
NUMBA_ENABLE_CUDASIM=1 exec "$PY" -m pytest tests/gpu -q "$@"
