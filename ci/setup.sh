#!/usr/bin/env bash
# Create .venv (if missing) and install hloref editable with the extras named by the
# first argument (pyproject.toml's profiles; default test: everything the tests need).
#   bash ci/setup.sh fuzz    # what ci/main.sh needs: the XLA:CPU oracle and Hypothesis
#   bash ci/setup.sh test    # what ci/test.sh needs (every extra, about 3 GB)
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${1:-test}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]" 2>&1 \
  | grep -v -E "^WARNING: Location .* is ignored" || true
# gdb: native backtraces of XLA crashes in findings (docs/triage.md); best effort
if ! command -v gdb >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gdb; } >/dev/null 2>&1 \
    || echo "gdb could not be installed: crash reports keep XLA's own stack trace only"
fi
.venv/bin/python -c "import hloref, numba, ml_dtypes; print('hloref', hloref.__version__, '| numba', numba.__version__, '| ml_dtypes', ml_dtypes.__version__)"
