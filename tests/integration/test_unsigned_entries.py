"""Unsigned lines after ``strict_after``: refused by verify-chain and by the gate."""

import json
from pathlib import Path
from typing import Any

import rfc8785

from ledger.core.envelope import unsigned_entry
from tests.integration.test_agent_helpers import cli

INIT_AT = {"LEDGER_NOW": "2026-06-01T12:00:00Z"}
LATER = {"LEDGER_NOW": "2026-06-01T12:10:00Z"}
LOA = Path(__file__).resolve().parents[1] / "fixtures" / "loa"


def _trust(home: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((home / "trust.json").read_text())
    return document


def _append_unsigned(home: Path, event_type: str, payload: dict[str, Any], ts_utc: str) -> None:
    """What anyone who can append to events.jsonl can write: a line with no signature."""
    chain = home / "events.jsonl"
    last = chain.read_bytes().splitlines()[-1]
    from ledger.core.envelope import parse_line

    prev = parse_line(last).entry_hash
    # RFC 8785 as loa writes it (its payloads hold USD as JSON numbers).
    line = rfc8785.dumps(unsigned_entry(event_type, payload, ts_utc, prev)) + b"\n"
    with chain.open("ab") as handle:
        handle.write(line)


def _forced_reconcile_to_zero() -> dict[str, Any]:
    """loa's forced reconcile: re-bases the counter to a $0 bill."""
    return {
        "verdict": "reconcile", "counter_usd": 9.5, "billing_usd": 0, "drift_pct": 100,
        "drift_threshold_pct": 5, "blocker": False, "provider": "aggregate",
        "utc_day": "2026-06-01", "billing_api_unreachable": False, "force_reconcile": True,
        "operator_reason": "billing says zero",
    }  # fmt: skip


def test_init_sets_strict_after_to_its_own_time(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert cli(run_inproc, home, "init", "--daily-cap-usd", "10", env=INIT_AT).code == 0
    assert _trust(home)["strict_after"] == "2026-06-01T12:00:00.000000Z"


def test_an_unsigned_forced_reconcile_neither_verifies_nor_reopens_the_gate(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert cli(run_inproc, home, "init", "--daily-cap-usd", "10", env=INIT_AT).code == 0
    ref = cli(run_inproc, home, "verdict", "9.5", "--provider", "openai", env=LATER)
    assert ref.json()["verdict"] == "warn-90"
    recorded = cli(run_inproc, home, "record", "9.5", "--provider", "openai",
                   "--verdict-ref", ref.json()["verdict_ref"], env=LATER)  # fmt: skip
    assert recorded.code == 0
    assert cli(run_inproc, home, "verdict", "0.25", env=LATER).json()["verdict"] != "allow"
    lines_before = len((home / "events.jsonl").read_bytes().splitlines())
    _append_unsigned(home, "budget.reconcile", _forced_reconcile_to_zero(),
                     "2026-06-01T12:11:00.000000Z")  # fmt: skip

    verified = cli(run_inproc, home, "verify-chain", env=LATER)
    assert verified.code == 1
    assert verified.stderr.startswith(f"BROKEN line {lines_before + 1}: ")
    assert "unsigned" in verified.stderr
    verdict = cli(run_inproc, home, "verdict", "0.25", env=LATER)
    assert verdict.code == 1
    body = verdict.json()
    assert (body["verdict"], body["uncertainty_reason"]) == (
        "halt-uncertainty",
        "counter_inconsistent",
    )
    assert f"line {lines_before + 1}" in body["diagnostic"]


def test_an_older_home_gets_strict_after_on_the_next_keys_command(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert cli(run_inproc, home, "init", "--daily-cap-usd", "10", env=INIT_AT).code == 0
    document = _trust(home)
    document["strict_after"] = None  # as `ledger init` wrote it before
    (home / "trust.json").write_text(json.dumps(document))

    rotated = cli(run_inproc, home, "keys", "rotate", env=LATER)
    assert rotated.code == 0, rotated.stderr
    assert rotated.stderr.startswith("ledger: note: ")
    assert "strict_after" in rotated.stderr
    assert _trust(home)["strict_after"] == "2026-06-01T12:10:00.000000Z"
    again = cli(run_inproc, home, "keys", "rotate", env=LATER)
    assert (again.code, again.stderr) == (0, "")


def test_an_older_home_keeps_its_earlier_unsigned_entries(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert cli(run_inproc, home, "init", "--daily-cap-usd", "10", env=INIT_AT).code == 0
    document = _trust(home)
    document["strict_after"] = None
    (home / "trust.json").write_text(json.dumps(document))
    cli(run_inproc, home, "verdict", "1", env=INIT_AT)
    _append_unsigned(home, "othertool.event", {"n": 1}, "2026-06-01T12:01:00.000000Z")
    assert cli(run_inproc, home, "keys", "rotate", env=LATER).code == 0
    assert cli(run_inproc, home, "verify-chain", env=LATER).stdout.startswith("OK ")


def test_taking_over_a_loa_log_refuses_unsigned_entries_from_the_takeover(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert cli(run_inproc, home, "init", "--daily-cap-usd", "50", env=INIT_AT).code == 0
    (home / "events.jsonl").write_bytes((LOA / "loa-sample-chain.jsonl").read_bytes())
    takeover = {"LEDGER_NOW": "2026-11-22T00:00:00Z"}
    trusted = cli(run_inproc, home, "keys", "trust",
                  f"demo-writer={LOA / 'loa-sample-chain.pub.pem'}", env=takeover)  # fmt: skip
    assert trusted.code == 0, trusted.stderr
    assert _trust(home)["strict_after"] == "2026-11-22T00:00:00.000000Z"
    assert cli(run_inproc, home, "verify-chain", env=takeover).code == 0
    _append_unsigned(home, "budget.reconcile", _forced_reconcile_to_zero(),
                     "2026-11-22T00:01:00.000000Z")  # fmt: skip
    assert cli(run_inproc, home, "verify-chain", env=takeover).stderr.startswith("BROKEN line 6")


def test_a_fleet_refuses_an_unsigned_row_inserted_by_sql(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    home = tmp_path / "host"
    assert (
        cli(run_inproc, home, "init", "--daily-cap-usd", "10", env={**pg_store_env, **INIT_AT}).code
        == 0
    )
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    stored = pg_server.sql(f'SELECT document FROM "{schema}".trust_store')  # noqa: S608
    assert json.loads(bytes(stored[0][0]))["strict_after"] == "2026-06-01T12:00:00.000000Z"
    assert cli(run_inproc, home, "verdict", "1", env=LATER).code == 0
    seq, end, last = pg_server.sql(
        f'SELECT seq, end_pos, line FROM "{schema}".chain ORDER BY seq DESC LIMIT 1'  # noqa: S608
    )[0]
    from ledger.core.envelope import parse_line

    entry = unsigned_entry(
        "budget.reconcile", _forced_reconcile_to_zero(), "2026-06-01T12:11:00.000000Z",
        parse_line(bytes(last).rstrip(b"\n")).entry_hash,
    )  # fmt: skip
    line = rfc8785.dumps(entry) + b"\n"
    pg_server.sql(
        f'INSERT INTO "{schema}".chain (seq, end_pos, entry_hash, ts_utc, event_type, line)'  # noqa: S608
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (seq + 1, end + len(line), "0" * 64, entry["ts_utc"], entry["event_type"], line),
    )
    verified = cli(run_inproc, home, "verify-chain", env=LATER)
    assert verified.stderr.startswith(f"BROKEN line {seq + 1}: "), verified.stderr
    halted = cli(run_inproc, home, "verdict", "0.25", env=LATER)
    assert (halted.code, halted.json()["uncertainty_reason"]) == (1, "counter_inconsistent")
