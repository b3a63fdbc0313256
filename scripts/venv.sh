#!/usr/bin/env bash
# Make a virtualenv at $1 with Python ≥ 3.11. Debian ships venv separately
# (python3-venv); install it when we are root and it is missing.
set -euo pipefail
VENV="$1"
if [ -x "$VENV/bin/python" ]; then
  # A venv made before the distribution was named spend-ledger still holds the
  # old 'ledger' one; both would own bin/ledger, so the old one goes first.
  if ls -d "$VENV"/lib/python3*/site-packages/ledger-*.dist-info >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip uninstall --quiet --disable-pip-version-check -y ledger
  fi
  exit 0
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "ledger needs Python 3.11 or newer (found $(python3 --version 2>&1))" >&2
  exit 1
fi
if ! python3 -m venv "$VENV" 2>/dev/null; then
  rm -rf "$VENV"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$VENV"
  else
    echo "python3 -m venv failed: install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  fi
fi
