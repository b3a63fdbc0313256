#!/usr/bin/env bash
# The one test command: a private venv, the package with its test extra, then
# ruff, mypy, import-linter and pytest. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEDGER_VENV:-.venv}"
bash scripts/venv.sh "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]"
export PATH="$PWD/$VENV/bin:$PATH"
# The report page's screenshot test renders it in a headless browser (Debian's chromium).
if [ "$(id -u)" -eq 0 ]; then
  command -v chromium >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  }
elif ! command -v chromium >/dev/null; then
  echo "test.sh: chromium is missing and installing it needs root (apt-get install chromium);" \
    "the report screenshot test will be skipped" >&2
fi
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
