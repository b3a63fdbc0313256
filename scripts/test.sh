#!/usr/bin/env bash
# The one test command: a private venv, the package with its test extra, then
# ruff, mypy, import-linter and pytest. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEDGER_VENV:-.venv}"
bash scripts/venv.sh "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]"
export PATH="$PWD/$VENV/bin:$PATH"
ruff check .
ruff format --check .
mypy
lint-imports
set +e
pytest -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "no tests ran" >&2
  exit 1
fi
exit "$status"
