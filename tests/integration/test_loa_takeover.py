"""Taking over a chain that loa's cost-budget-enforcer began (SPEC §5, README recipe)."""

import json
import shutil
from pathlib import Path

from tests.integration.test_agent_helpers import cli

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "loa"
AFTER = {"LEDGER_NOW": "2026-11-21T23:30:00Z"}
LOA_HEAD = "5c5110df1a1176be025a2a97d61bde3226776f8f63d66e7f1d50f82f5cdcd128"


def _take_over(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "50"]).code == 0
    shutil.copy(SAMPLE / "loa-sample-chain.jsonl", home / "events.jsonl")
    trusted = cli(run_inproc, home, "keys", "trust",
                  f"demo-writer={SAMPLE / 'loa-sample-chain.pub.pem'}")  # fmt: skip
    assert trusted.code == 0, trusted.stderr
    assert trusted.json() == {"trusted": "demo-writer", "signs": False, "changed": True}
    return home


def test_the_recipe_counts_loa_spend_and_chains_after_it(tmp_path, run_inproc):
    home = _take_over(tmp_path, run_inproc)
    verified = cli(run_inproc, home, "verify-chain", env=AFTER)
    assert (verified.code, verified.stdout.strip()) == (0, "OK 5 entries")
    verdict = cli(run_inproc, home, "verdict", "1", "--provider", "anthropic", env=AFTER)
    assert verdict.code == 0, verdict.stdout
    body = verdict.json()
    assert body["verdict"] == "allow"
    assert body["usd_used_micros"] == 1_420_000  # loa's record_call, exactly
    lines = (home / "events.jsonl").read_text().splitlines()
    assert len(lines) == 6
    ours = json.loads(lines[5])
    assert ours["prev_hash"] == LOA_HEAD
    assert ours["signing_key_id"] != "demo-writer"
    assert cli(run_inproc, home, "verify-chain", env=AFTER).stdout.strip() == "OK 6 entries"
    record = cli(run_inproc, home, "record", "2", "--provider", "anthropic",
                 "--verdict-ref", body["verdict_ref"], env=AFTER)  # fmt: skip
    assert record.code == 0
    usage = cli(run_inproc, home, "usage", "--provider", "anthropic", env=AFTER).json()
    assert usage["usd_used_micros"] == 3_420_000


def test_the_loa_key_verifies_but_never_signs(tmp_path, run_inproc):
    home = _take_over(tmp_path, run_inproc)
    again = cli(run_inproc, home, "keys", "trust",
                f"demo-writer={SAMPLE / 'loa-sample-chain.pub.pem'}")  # fmt: skip
    assert again.json()["changed"] is False
    rotated = cli(run_inproc, home, "keys", "rotate", env=AFTER)
    assert rotated.code == 0, rotated.stderr
    assert rotated.json()["old_key_id"] != "demo-writer"
    trust = json.loads((home / "trust.json").read_text())
    loa = next(k for k in trust["keys"] if k["key_id"] == "demo-writer")
    assert loa["signs"] is False


def test_bad_trust_arguments(tmp_path, run_inproc):
    home = tmp_path / "home"
    run_inproc(["--home", str(home), "init", "--daily-cap-usd", "50"])
    pem = SAMPLE / "loa-sample-chain.pub.pem"
    for arg, code in (
        (str(pem), 2),
        (f"Bad Id={pem}", 2),
        (f"x={tmp_path / 'missing.pem'}", 65),
        (f"x={SAMPLE / 'loa-sample-chain.jsonl'}", 65),
    ):
        result = cli(run_inproc, home, "keys", "trust", arg)
        assert result.code == code, (arg, result.stderr)
        assert result.stderr.startswith("ledger: ") or "ledger: " in result.stderr


def test_without_the_key_loa_entries_do_not_verify_and_the_gate_halts(tmp_path, run_inproc):
    home = tmp_path / "home"
    run_inproc(["--home", str(home), "init", "--daily-cap-usd", "50"])
    shutil.copy(SAMPLE / "loa-sample-chain.jsonl", home / "events.jsonl")
    assert cli(run_inproc, home, "verify-chain", env=AFTER).code == 1
    verdict = cli(run_inproc, home, "verdict", "1", env=AFTER)
    assert verdict.code == 1
    assert verdict.json()["uncertainty_reason"] == "counter_inconsistent"
