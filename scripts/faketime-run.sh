#!/usr/bin/env bash
# The test suite with the system clock shifted (default: a year ahead), to show
# that no test depends on today's date. Usage: scripts/faketime-run.sh [OFFSET] [pytest args]
# e.g. scripts/faketime-run.sh +365d, scripts/faketime-run.sh -365d -x
set -euo pipefail
cd "$(dirname "$0")/.."
OFFSET="${1:-+365d}"
shift || true
if ! command -v faketime >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && apt-get install -y -qq faketime
  else
    echo "faketime is missing: apt-get install faketime" >&2
    exit 1
  fi
fi
# The monotonic clock stays real (lock and event timeouts use it); time.sleep
# goes through select() (see scripts/faketime/sitecustomize.py).
export PYTHONPATH="$PWD/scripts/faketime${PYTHONPATH:+:$PYTHONPATH}"
export FAKETIME_DONT_FAKE_MONOTONIC=1
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
faketime -f "$OFFSET" date -u
exec faketime -f "$OFFSET" "${LEDGER_VENV:-.venv}/bin/pytest" -p no:cacheprovider "$@"
