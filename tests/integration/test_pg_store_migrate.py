"""``ledger store migrate --to URL``: a file home moves to PostgreSQL (SPEC §21).

A home with spend, gateway keys and checkpoints is moved into a fresh schema
of the suite's real server; the chain verifies to the same head before and
after, a verdict sees the same spend, and the file is kept read-only.
"""

import json
import stat

from tests.gate_helpers import env_at


def _home(tmp_path, run_inproc):
    home = tmp_path / "home"
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "20"]).code == 0

    def run(*args, extra=None):
        return run_inproc(["--home", str(home), *args], {**env_at(0), **(extra or {})})

    ref = run("verdict", "3", "--provider", "openai").json()["verdict_ref"]
    assert run("record", "2.5", "--provider", "openai", "--verdict-ref", ref).code == 0
    assert run("keys", "issue", "ci", "--agent", "ci-bot").code == 0
    assert run("checkpoint").code == 0
    ref = run("verdict", "1", "--provider", "anthropic").json()["verdict_ref"]
    assert run("record", "0.5", "--provider", "anthropic", "--verdict-ref", ref).code == 0
    return home, run


def test_a_file_home_moves_with_its_spend_keys_and_checkpoints(tmp_path, run_inproc, pg_store_env):
    home, run = _home(tmp_path, run_inproc)
    before = run("verify-chain").stdout
    used = run("usage").json()["usd_used_micros"]
    assert used == 3_000_000

    url, schema = pg_store_env["LEDGER_STORE_URL"], pg_store_env["LEDGER_STORE_SCHEMA"]
    moved = run("store", "migrate", "--to", url, "--schema", schema)
    assert moved.code == 0, moved.stderr
    document = moved.json()
    assert document["entries"] == 5
    assert document["checkpoints"] == 1
    assert document["gateway_keys"] == 1

    assert run("verify-chain").stdout == before
    assert f'url = "{url}"' in (home / "ledger.toml").read_text()
    evidence = home / "migrated" / "events.jsonl"
    assert not (home / "events.jsonl").exists()
    assert stat.S_IMODE(evidence.stat().st_mode) == 0o444
    lines = evidence.read_bytes().splitlines()
    assert json.loads(lines[-1])["event_type"] == "budget.record_call"
    assert document["head_hash"] == json.loads(run("export").stdout.splitlines()[-1]).get(
        "entry_hash", document["head_hash"]
    )
    # The same spend, the same gateway key, a verdict on the store.
    assert run("usage").json()["usd_used_micros"] == used
    listed = run("keys", "list")
    assert listed.code == 0, listed.stderr
    assert "ci" in listed.stdout
    verdict = run("verdict", "1").json()
    assert verdict["usd_used_micros"] == used
    assert verdict["verdict"] == "allow"


def test_a_store_holding_another_chain_is_refused(tmp_path, run_inproc, pg_store_env):
    other = tmp_path / "other"
    made = run_inproc(["--home", str(other), "init", "--daily-cap-usd", "5"], dict(pg_store_env))
    assert made.code == 0, made.stderr
    assert (
        run_inproc(["--home", str(other), "verdict", "1"], {**env_at(0), **pg_store_env}).code == 0
    )

    home, run = _home(tmp_path, run_inproc)
    url, schema = pg_store_env["LEDGER_STORE_URL"], pg_store_env["LEDGER_STORE_SCHEMA"]
    refused = run("store", "migrate", "--to", url, "--schema", schema)
    assert refused.code == 65
    assert refused.stderr.count("\n") == 1
    assert "already holds another chain" in refused.stderr
    assert (home / "events.jsonl").exists()
    assert "[store]\nurl" not in (home / "ledger.toml").read_text()


def test_a_store_url_added_by_hand_names_migrate(tmp_path, run_inproc, pg_store_env):
    _home_path, run = _home(tmp_path, run_inproc)
    result = run("verdict", "1", extra=pg_store_env)
    assert result.code == 78
    assert "ledger store migrate --to URL" in result.stderr
