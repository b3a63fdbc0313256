#!/usr/bin/env bash
# Install ledger into ./.venv and run the main job on the embedded default:
# a local home (./.ledger) with a generated key, one gated call, its record,
# and an audit of the chain.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEDGER_VENV:-.venv}"
bash scripts/venv.sh "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e .
LEDGER="$VENV/bin/ledger"
HOME_DIR="${LEDGER_HOME:-./.ledger}"
"$LEDGER" --home "$HOME_DIR" init --daily-cap-usd 50
verdict=$("$LEDGER" --home "$HOME_DIR" verdict 0.25 --provider anthropic)
echo "$verdict"
ref=$(printf '%s' "$verdict" | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["verdict_ref"])')
"$LEDGER" --home "$HOME_DIR" record 0.21 --provider anthropic --verdict-ref "$ref" --model-id claude-opus
"$LEDGER" --home "$HOME_DIR" usage
"$LEDGER" --home "$HOME_DIR" checkpoint
"$LEDGER" --home "$HOME_DIR" verify-chain
