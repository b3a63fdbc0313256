#!/usr/bin/env bash
# The one test command: a private venv, the package with its test extra, then
# ruff, mypy, import-linter and pytest. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEDGER_VENV:-.venv}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac  # an absolute path, whichever was given
bash scripts/venv.sh "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]"
# The fleet tests start a throw-away PostgreSQL server: install Debian's
# postgresql package when no server binaries are on the machine.
if ! command -v pg_ctl >/dev/null && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "scripts/test.sh: no PostgreSQL server binaries; install Debian's postgresql package" \
      "(apt-get install postgresql) or the fleet tests are skipped" >&2
  fi
fi
export PATH="$VENV/bin:$PATH"
# The report page's screenshot test renders it in a headless browser (Debian's chromium);
# the console's browser tests drive it with Selenium through Debian's chromium-driver.
if [ "$(id -u)" -eq 0 ]; then
  command -v chromium >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  }
  command -v chromedriver >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-driver
  }
elif ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "test.sh: chromium or chromedriver is missing and installing them needs root" \
    "(apt-get install chromium chromium-driver); the browser tests will be skipped" >&2
fi
# The real agent CLIs the tests drive (Claude Code, Codex CLI, Gemini CLI), from
# npm at pinned versions into a cache that later runs reuse; without npm those
# tests are skipped and say so. Node and npm come from Debian's packages when missing.
if ! command -v npm >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if command -v npm >/dev/null; then
  "$VENV/bin/python" -m tests.agents_cli.clis >/dev/null
else
  echo "scripts/test.sh: npm is missing; the tests with real agent CLIs are skipped" >&2
fi
ruff check .
ruff format --check .
mypy
lint-imports
# The documentation site must build without a warning (to a throw-away folder).
site="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet --site-dir "$site"
rm -rf "$site"
set +e
# Two test processes (one a core on CI's two), each with its own PostgreSQL server and
# temporary folders; a file's tests stay together in one process, in their order, sharing
# their module's set-up. LEDGER_TEST_WORKERS=0 runs them in this process alone.
pytest -p no:cacheprovider -n "${LEDGER_TEST_WORKERS:-2}" --dist loadfile "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "no tests ran" >&2
  exit 1
fi
exit "$status"
