#!/usr/bin/env bash
# Long fuzz campaign (nightly). Findings accumulate in $OUT across runs (the campaign
# resumes from it); the Hypothesis example database lives in $DB and is shared
# between runs as the hloref-fuzz-db artifact (see ci/github-actions-fuzz.yml).
# RAY=ADDRESS runs the workers as actors on that Ray cluster (WORKERS then defaults to
# one per CPU of the cluster; DB should be on storage every node sees, or redis://...).
#   TIME=2h WORKERS=2 ORACLE=xla ci/fuzz_nightly.sh
#   TIME=8h RAY=auto DB=/shared/hloref-fuzz-db ci/fuzz_nightly.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${OUT:-fuzz-findings}
DB=${DB:-.hypothesis/hloref-fuzz}
TIME=${TIME:-1h}
if [ -n "${RAY:-}" ]; then
  WORKERS=${WORKERS:-}
else
  WORKERS=${WORKERS:-$(nproc 2>/dev/null || echo 2)}
fi
ORACLE=${ORACLE:-xla}
SEED=${SEED:-$(date +%Y%m%d)}
EXTRA=()
if [ -n "${DB_GITHUB:-}" ]; then EXTRA+=(--db-github "$DB_GITHUB"); fi
if [ -n "${RAY:-}" ]; then EXTRA+=(--ray "$RAY"); fi
if [ -n "$WORKERS" ]; then EXTRA+=(--workers "$WORKERS"); fi
mkdir -p "$OUT"
set +e
"$PY" -m hloref fuzz --time "$TIME" --seed "$SEED" --oracle "$ORACLE" \
    --out "$OUT" --db "$DB" --json-summary "$OUT/summary.json" --junit "$OUT/junit.xml" \
    "${EXTRA[@]}" "$@"
status=$?
set -e
# which stored findings (also those of earlier nights) still reproduce
"$PY" -m hloref replay "$OUT" --json "$OUT/replay.json" || true
exit $status
