#!/usr/bin/env bash
# Long fuzz campaign (nightly). Findings accumulate in $OUT across runs (the campaign
# resumes from it); the Hypothesis example database lives in $DB and is shared
# between runs as the hloref-fuzz-db artifact (see ci/github-actions-fuzz.yml).
#   TIME=2h WORKERS=2 ORACLE=xla ci/fuzz_nightly.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${OUT:-fuzz-findings}
DB=${DB:-.hypothesis/hloref-fuzz}
TIME=${TIME:-1h}
WORKERS=${WORKERS:-$(nproc 2>/dev/null || echo 2)}
ORACLE=${ORACLE:-xla}
SEED=${SEED:-$(date +%Y%m%d)}
EXTRA=()
if [ -n "${DB_GITHUB:-}" ]; then EXTRA+=(--db-github "$DB_GITHUB"); fi
mkdir -p "$OUT"
set +e
"$PY" -m hloref fuzz --time "$TIME" --seed "$SEED" --oracle "$ORACLE" --workers "$WORKERS" \
    --out "$OUT" --db "$DB" --json-summary "$OUT/summary.json" --junit "$OUT/junit.xml" \
    "${EXTRA[@]}" "$@"
status=$?
set -e
# which stored findings (also those of earlier nights) still reproduce
"$PY" -m hloref replay "$OUT" --json "$OUT/replay.json" || true
exit $status
