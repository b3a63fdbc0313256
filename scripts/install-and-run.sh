#!/usr/bin/env bash
# Install ledger into ./.venv and run the main job on the embedded default:
# a local home (./.ledger) with a generated key, one gated call, its record,
# and an audit of the chain; it ends with a summary and what to do next.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LEDGER_VENV:-.venv}"
bash scripts/venv.sh "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e .
LEDGER="$VENV/bin/ledger"
HOME_DIR="${LEDGER_HOME:-./.ledger}"
# Billing: no observer here, so the home counts its own records only
# (--billing none). Without that choice verdicts would halt above 75 % of the cap
# until a billing observer is configured. A home made before keeps its config.
if [ -e "$HOME_DIR/ledger.toml" ]; then
  "$LEDGER" --home "$HOME_DIR" init
else
  "$LEDGER" --home "$HOME_DIR" init --daily-cap-usd 50 --billing none
fi
verdict=$("$LEDGER" --home "$HOME_DIR" verdict 0.25 --provider anthropic)
echo "$verdict"
ref=$(printf '%s' "$verdict" | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["verdict_ref"])')
outcome=$(printf '%s' "$verdict" | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["verdict"])')
cap=$(printf '%s' "$verdict" | "$VENV/bin/python" -c 'import json,sys; print(format(json.load(sys.stdin)["daily_cap_usd"], "g"))')
"$LEDGER" --home "$HOME_DIR" record 0.21 --provider anthropic --verdict-ref "$ref" --model-id claude-sonnet-4-5 --idempotency-key "first-$ref"
"$LEDGER" --home "$HOME_DIR" usage
"$LEDGER" --home "$HOME_DIR" checkpoint
verified=$("$LEDGER" --home "$HOME_DIR" verify-chain)
echo "$verified"
"$LEDGER" --home "$HOME_DIR" status
billing=$("$LEDGER" --home "$HOME_DIR" status --json | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["billing"]["source"])')

cat <<SUMMARY

Done. $("$LEDGER" --version) is installed in $VENV, with a home in $HOME_DIR:
  - a configuration (ledger.toml) with a \$$cap daily cap, a signing key and a trust store;
  - billing source: $billing (\`ledger status\` shows it); with none, spend is ledger's own
    records only: for the provider's bill near the cap, set [observer] command in
    ledger.toml and billing.stale_halt_pct back to 75 (docs/concepts/uncertainty.md);
  - one gated call: a verdict on an estimated \$0.25 ($outcome), then its actual \$0.21 recorded;
  - a signed checkpoint, and the whole chain verified ($verified).

Next:
  export PATH="\$PWD/$VENV/bin:\$PATH"   # so that 'ledger' is the command
  export LEDGER_HOME=$HOME_DIR
  ledger status                              # where the day stands
  ledger verdict 1.50 --provider anthropic   # gate another call (exit 0: go ahead, 1: halted)
  ledger --help                              # every command; 'ledger COMMAND --help' for one
Then put your agents behind the gate: README.md (gateway, Claude Code, Python) and docs/.
SUMMARY
