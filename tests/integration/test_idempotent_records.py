"""``record`` and ``tokens record`` with ``--idempotency-key`` (SPEC §3)."""

import contextlib
import json
import sqlite3

import pytest

from tests.integration.test_agent_helpers import (
    assert_chain_verifies,
    cli,
    event_types,
    payloads,
    popen_ledger,
    process_env,
)

NOW = {"LEDGER_NOW": "2026-06-01T12:00:00Z"}
LATER = {"LEDGER_NOW": "2026-06-09T08:00:00Z"}  # another day entirely


def _record(run_inproc, home, amount, key, env=NOW):
    return cli(run_inproc, home, "record", amount, "--provider", "openai",
               "--idempotency-key", key, env=env)  # fmt: skip


def test_a_repeat_writes_nothing_and_prints_the_first_result(home, run_inproc):
    first = _record(run_inproc, home, "1.25", "req-1")
    assert first.code == 0, first.stderr
    body = first.json()
    assert body["duplicate"] is False
    size = (home / "events.jsonl").stat().st_size
    again = _record(run_inproc, home, "1.25", "req-1", env=LATER)
    assert again.code == 0
    assert (home / "events.jsonl").stat().st_size == size
    assert again.json() == body | {"duplicate": True}
    assert again.json()["actual_micros"] == 1_250_000
    other = _record(run_inproc, home, "2", "req-2")
    assert other.json()["duplicate"] is False
    assert [p["idempotency_key"] for p in payloads(home, "budget.record_call")] == [
        "req-1",
        "req-2",
    ]
    assert cli(run_inproc, home, "usage", env=NOW).json()["usd_used_micros"] == 3_250_000


@pytest.mark.parametrize(
    "other",
    [
        ["2.50", "--provider", "openai"],  # another amount
        ["1.25", "--provider", "anthropic"],  # another provider
        ["1.25", "--provider", "openai", "--model-id", "gpt-4o"],  # another model
    ],
    ids=["amount", "provider", "model"],
)
def test_a_key_reused_for_another_record_is_refused(tmp_path, other):
    """One ``ledger:`` line naming the first record, exit 2, nothing sealed (real processes)."""
    from tests.integration.server_helpers import init_home, ledger

    home = init_home(tmp_path / "home")
    first = ledger(home, "record", "1.25", "--provider", "openai", "--idempotency-key", "req-1")
    assert first.code == 0, first.stderr
    entry = json.loads(first.stdout)["entry_hash"]
    size = (home / "events.jsonl").stat().st_size
    reused = ledger(home, "record", *other, "--idempotency-key", "req-1")
    assert (reused.code, reused.stdout) == (2, "")
    assert reused.stderr.startswith("ledger: --idempotency-key req-1 was first used for another")
    assert f"(entry {entry[:16]}…: $1.25 openai, " in reused.stderr
    assert reused.stderr.count("\n") == 1
    assert (home / "events.jsonl").stat().st_size == size
    same = ledger(home, "record", "1.25", "--provider", "openai", "--idempotency-key", "req-1")
    assert (same.code, json.loads(same.stdout)["duplicate"]) == (0, True)


def test_a_key_reused_for_another_record_is_refused_when_served(tmp_path):
    """``ledger serve`` answers the reuse as the in-process command does."""
    from tests.integration.server_helpers import init_home, kill_quietly, ledger, start_server

    home = init_home(tmp_path / "home")
    server = start_server(home)
    try:
        first = ledger(home, "record", "1", "--provider", "openai", "--idempotency-key", "s-1")
        reused = ledger(home, "record", "2", "--provider", "openai", "--idempotency-key", "s-1")
    finally:
        kill_quietly(server)
    assert first.code == 0, first.stderr
    assert reused.code == 2
    assert "was first used for another record" in reused.stderr
    assert len(payloads(home, "budget.record_call")) == 1


def test_a_key_reused_for_another_record_in_the_python_api(home):
    """``Ledger.record`` raises a LedgerError with exit code 2 and seals nothing."""
    import ledger as ledger_api

    book = ledger_api.Ledger(home)
    book.record(0.5, provider="openai", idempotency_key="api-1")
    with pytest.raises(ledger_api.LedgerError) as caught:
        book.record(0.75, provider="openai", idempotency_key="api-1")
    assert caught.value.exit_code == 2
    assert "api-1 was first used for another record" in str(caught.value)
    assert book.record(0.5, provider="openai", idempotency_key="api-1").duplicate is True
    assert len(payloads(home, "budget.record_call")) == 1


def test_the_key_survives_rebuild_state_and_a_lost_state(home, run_inproc):
    _record(run_inproc, home, "1", "k:1")
    assert cli(run_inproc, home, "rebuild-state", env=NOW).code == 0
    assert _record(run_inproc, home, "1", "k:1").json()["duplicate"] is True
    # Derived state and the key index gone: both are rebuilt from the chain.
    import shutil

    shutil.rmtree(home / "state")
    assert _record(run_inproc, home, "1", "k:1").json()["duplicate"] is True
    assert len(payloads(home, "budget.record_call")) == 1


def _index(home):
    return sqlite3.connect(home / "state" / "index.sqlite3", isolation_level=None)


def test_an_edited_index_row_is_not_trusted(home, run_inproc):
    """A row that fails its MAC is never believed: the chain answers, and the index is rebuilt."""
    _record(run_inproc, home, "1", "real")
    with contextlib.closing(_index(home)) as db:
        db.execute(
            "INSERT INTO keys (k, next, ts, record, mac) SELECT CAST('fake' AS BLOB), next, ts,"
            " replace(record, '\"real\"', '\"fake\"'), mac FROM keys"
            " WHERE k = CAST('real' AS BLOB)"
        )
    assert _record(run_inproc, home, "1", "fake").json()["duplicate"] is False
    assert _record(run_inproc, home, "1", "real").json()["duplicate"] is True
    with contextlib.closing(_index(home)) as db:
        forged = db.execute("SELECT count(*) FROM keys WHERE k = CAST('fake' AS BLOB)").fetchone()[
            0
        ]
    assert forged == 1  # the genuine record of the second call, rebuilt with the index
    assert len(payloads(home, "budget.record_call")) == 2
    assert cli(run_inproc, home, "usage", env=NOW).json()["usd_used_micros"] == 2_000_000


def test_a_removed_index_row_is_noticed(home, run_inproc):
    """A key's row deleted from the index: its neighbour's link gives it away, counted once."""
    assert _record(run_inproc, home, "1", "a").code == 0
    assert _record(run_inproc, home, "2", "b").code == 0
    with contextlib.closing(_index(home)) as db:
        db.execute("DELETE FROM keys WHERE k = CAST('b' AS BLOB)")
    assert _record(run_inproc, home, "2", "b").json()["duplicate"] is True
    assert _record(run_inproc, home, "1", "a").json()["duplicate"] is True
    assert len(payloads(home, "budget.record_call")) == 2


def test_calls_make_no_file_each(home, run_inproc):
    """The derived indexes are one database, not a file per key."""
    for number in range(40):
        assert _record(run_inproc, home, "0.01", f"k:{number}").code == 0
    files = {path.name for path in (home / "state").rglob("*") if path.is_file()}
    assert files <= {"derived.json", "index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"}
    assert _record(run_inproc, home, "0.01", "k:7").json()["duplicate"] is True


@pytest.mark.parametrize("damage", ["rolled back", "removed"])
def test_an_index_that_lost_commits_still_finds_the_key(home, run_inproc, damage):
    """A power loss may keep the state but lose the index's newest commits: rebuilt, once."""
    assert _record(run_inproc, home, "1", "kept").code == 0
    database = home / "state" / "index.sqlite3"
    with contextlib.closing(_index(home)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    saved = database.read_bytes()
    assert _record(run_inproc, home, "2", "lost").code == 0
    for suffix in ("-wal", "-shm"):
        database.with_name(database.name + suffix).unlink(missing_ok=True)
    if damage == "removed":
        database.unlink()
    else:
        staged = database.with_name("staged")
        staged.write_bytes(saved)
        staged.replace(database)
    repeat = _record(run_inproc, home, "2", "lost")
    assert repeat.code == 0, repeat.stderr
    assert repeat.json()["duplicate"] is True
    assert _record(run_inproc, home, "3", "other").json()["duplicate"] is False
    assert _record(run_inproc, home, "1", "kept").json()["duplicate"] is True
    assert len(payloads(home, "budget.record_call")) == 3
    assert cli(run_inproc, home, "usage", env=NOW).json()["usd_used_micros"] == 6_000_000


def test_a_home_kept_with_bucket_files_is_rebuilt_into_the_index(home, run_inproc):
    """Homes written by earlier versions (bucket files, a file per key) rebuild on first use."""
    assert _record(run_inproc, home, "1", "old").code == 0
    state = home / "state"
    for suffix in ("", "-wal", "-shm"):
        (state / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    (state / "index").mkdir()
    (state / "index" / "ab.log").write_text('{"key":"old"} 00\n')
    (state / "counters").mkdir()
    (state / "counters" / "ab.1.log").write_text("{}\n")
    (state / "keys" / "ab").mkdir(parents=True)
    (state / "keys" / "ab" / ("ab" * 32 + ".json")).write_text("{}")
    _as_older_version(state)
    assert _record(run_inproc, home, "1", "old").json()["duplicate"] is True
    for retired in ("index", "counters", "keys"):
        assert not (state / retired).exists()
    assert (state / "index.sqlite3").exists()
    assert cli(run_inproc, home, "usage", env=NOW).json()["usd_used_micros"] == 1_000_000


def _as_older_version(state_dir):
    """Rewrite derived.json as an earlier version wrote it (bucket sizes, no index), MAC and all."""
    import hashlib
    import hmac

    path = state_dir / "derived.json"
    body, _, _ = path.read_bytes().rstrip(b"\n").rpartition(b"\n")
    document = json.loads(body)
    del document["index_seq"]
    document["index"] = {"ab": 14}
    document["value_buckets"] = ""
    body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    key = (state_dir.parent / "keys" / "state-mac.key").read_bytes()
    mac = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    path.write_bytes(body + b"\n" + mac + b"\n")


@pytest.mark.parametrize(
    "key", ["", "has space", "x" * 129, "semi;colon", "slash/x", "ünï", "new\nline"]
)
def test_bad_keys_are_a_bad_command_line_and_write_nothing(home, run_inproc, key):
    result = _record(run_inproc, home, "1", key)
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].startswith("ledger: --idempotency-key")
    assert not (home / "events.jsonl").exists()
    tokens = cli(run_inproc, home, "tokens", "record", "c", "a", "1", "1",
                 "--idempotency-key", key, env=NOW)  # fmt: skip
    assert tokens.code == 2
    assert not (home / "events.jsonl").exists()


def test_the_longest_key_is_accepted(home, run_inproc):
    key = "A-z.0:_" * 18 + "ab"
    assert len(key) == 128
    assert _record(run_inproc, home, "1", key).json()["duplicate"] is False
    assert _record(run_inproc, home, "1", key).json()["duplicate"] is True


def test_eight_processes_with_one_key_seal_exactly_one_record(home, run_inproc):
    env = process_env(**NOW)
    procs = [
        popen_ledger(
            home, "record", "1", "--provider", "openai", "--idempotency-key", "once", env=env
        )
        for _ in range(8)
    ]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 8, outputs
    bodies = [json.loads(out) for out, _ in outputs]
    assert sorted(b["duplicate"] for b in bodies) == [False] + [True] * 7
    assert len({b["entry_hash"] for b in bodies}) == 1
    assert event_types(home).count("budget.record_call") == 1
    assert_chain_verifies(run_inproc, home)


def test_tokens_record_is_idempotent_by_key(home, run_inproc):
    cli(run_inproc, home, "tokens", "create", "c", "--agent-max", "1000", env=NOW)
    args = ("tokens", "record", "c", "a", "100", "50", "--idempotency-key", "t-1")
    first = cli(run_inproc, home, *args, env=NOW)
    assert first.code == 0
    assert first.json()["duplicate"] is False
    again = cli(run_inproc, home, *args, env=LATER)
    assert again.code == 0
    body = again.json()
    assert body["duplicate"] is True
    assert body["entry_hash"] == first.json()["entry_hash"]
    assert event_types(home).count("tokens.record") == 1
    # A key used by a USD record is not a duplicate of a token record.
    assert _record(run_inproc, home, "1", "t-1").json()["duplicate"] is False
    report = cli(run_inproc, home, "tokens", "report", "c", env=NOW).json()
    assert report["total_consumed"] == 150
