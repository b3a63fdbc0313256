# ruff: noqa: S608 - schema names are the tests' own identifiers
"""Segments of a fleet's chain (SPEC §21): ranges of rows sealed by a signed checkpoint.

Against the real server the suite starts (``tests.pg``): writers seal in the
append's own transaction; a verification reads one snapshot without the
advisory lock, so a writer's append commits while it is still open; an edited
row is found at its line and a cut at a boundary by the seal past it; ``store
migrate`` keeps a file home's boundaries; an older schema is refused until one
host's ``ledger init`` upgrades it.
"""

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from ledger.core.checkpoint import checkpoint_signature_problem
from ledger.core.snapshot import checkpoint_from_bytes
from ledger.runtime import Runtime
from tests.gate_helpers import CAP_ENV
from tests.helpers.chains import entry_hash
from tests.helpers.segments import append_records, seal_every
from tests.pg import store_of_release

REPO = Path(__file__).resolve().parents[2]
NOW = "2026-11-22T09:00:00Z"  # the day of the records ``append_records`` writes


def _append(home: Path, count: int, env: dict[str, str] | None = None) -> None:
    append_records(home, count, env={**(env or {}), "LEDGER_NOW": NOW})


def _host(tmp_path: Path, run_inproc, env: dict[str, str], *, seal_at: int | None = 3) -> Path:
    home = tmp_path / "host"
    result = run_inproc(["--home", str(home), "init", "--daily-cap-usd", "50"], dict(env))
    assert result.code == 0, result.stderr
    if seal_at is not None:
        text = (home / "ledger.toml").read_text()
        if "segment_entries" not in text:
            text += f"\n[chain]\nsegment_entries = {seal_at}\n"
            (home / "ledger.toml").write_text(text)
        else:
            seal_every(home, seal_at)
    return home


def _run(run_inproc, home: Path, *args: str):
    return run_inproc(["--home", str(home), *args], {"LEDGER_NOW": NOW, **CAP_ENV})


def _segments(pg_server, schema: str) -> list[tuple[int, int, int, str, bytes]]:
    rows = pg_server.sql(
        f'SELECT number, first_seq, last_seq, head_hash, checkpoint FROM "{schema}".segments'
        " ORDER BY number"
    )
    return [(int(n), int(a), int(b), str(h), bytes(c)) for n, a, b, h, c in rows]


def _rows(pg_server, schema: str) -> list[bytes]:
    rows = pg_server.sql(f'SELECT line FROM "{schema}".chain ORDER BY seq')
    return [bytes(line) for (line,) in rows]


def _edit_row(pg_server, schema: str, seq: int) -> None:
    """Change one row's bytes with every trigger that would stop or note it disabled."""
    guards = ("chain_append_only", "chain_changed")
    with psycopg.connect(pg_server.url) as conn, conn.transaction():
        found = conn.execute(f'SELECT line FROM "{schema}".chain WHERE seq = %s', (seq,))
        line = bytes(found.fetchall()[0][0])
        document = json.loads(line)
        document["payload"]["cycle_id"] = "edited"
        edited = json.dumps(document, separators=(",", ":")).encode() + b"\n"
        for guard in guards:
            conn.execute(f'ALTER TABLE "{schema}".chain DISABLE TRIGGER {guard}')
        conn.execute(f'UPDATE "{schema}".chain SET line = %s WHERE seq = %s', (edited, seq))
        for guard in guards:
            conn.execute(f'ALTER TABLE "{schema}".chain ENABLE TRIGGER {guard}')


def test_writers_seal_each_range_in_the_append_transaction(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    home = _host(tmp_path, run_inproc, pg_store_env)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    _append(home, 8, pg_store_env)
    rows = _rows(pg_server, schema)
    sealed = _segments(pg_server, schema)
    assert len(sealed) == len(rows) // 3
    trust = Runtime(home, pg_store_env).keys.load_trust()
    expected_first = 1
    for number, first, last, head, document in sealed:
        assert (first, last - first + 1) == (expected_first, 3)
        checkpoint = checkpoint_from_bytes(document, "seal")
        assert checkpoint_signature_problem(checkpoint, trust) is None
        assert (checkpoint.entries, checkpoint.head_hash) == (last, head)
        assert head == entry_hash(rows[last - 1])
        assert checkpoint.chain_id == entry_hash(rows[0])
        assert number == last // 3
        expected_first = last + 1
    # The next range begins with the entry that links to the sealed head.
    assert json.loads(rows[sealed[-1][2]])["prev_hash"] == sealed[-1][3]
    assert _run(run_inproc, home, "verify-chain").stdout == f"OK {len(rows)} entries\n"
    assert _run(run_inproc, home, "verify-chain", "--full").stdout == f"OK {len(rows)} entries\n"


def test_an_edited_row_in_a_sealed_range_is_found_at_its_line(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    home = _host(tmp_path, run_inproc, pg_store_env)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    _append(home, 8, pg_store_env)
    assert _segments(pg_server, schema)
    assert _run(run_inproc, home, "checkpoint").code == 0
    # Past the triggers and without a note: the verification without --full
    # resumes at the checkpoint's mark only when the prefix's bytes are as verified.
    _edit_row(pg_server, schema, 2)
    for args in (("verify-chain",), ("verify-chain", "--full")):
        broken = _run(run_inproc, home, *args)
        assert broken.code == 1, (args, broken.stdout)
        assert broken.stderr.startswith("BROKEN line 2:"), (args, broken.stderr)


def test_a_cut_at_a_segment_boundary_is_found_by_the_seal_past_it(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    home = _host(tmp_path, run_inproc, pg_store_env)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    _append(home, 8, pg_store_env)
    sealed = _segments(pg_server, schema)
    assert len(sealed) >= 2
    keep = sealed[-2][2]  # what is left ends exactly at a sealed head: it links and verifies
    with psycopg.connect(pg_server.url) as conn, conn.transaction():
        for guard in ("chain_append_only", "chain_changed"):
            conn.execute(f'ALTER TABLE "{schema}".chain DISABLE TRIGGER {guard}')
        conn.execute(f'DELETE FROM "{schema}".chain WHERE seq > %s', (keep,))
        for guard in ("chain_append_only", "chain_changed"):
            conn.execute(f'ALTER TABLE "{schema}".chain ENABLE TRIGGER {guard}')
    for args in (("verify-chain",), ("verify-chain", "--full")):
        # (A finding is kept as an entry of its own: the second run sees one more.)
        line = len(_rows(pg_server, schema)) + 1
        broken = _run(run_inproc, home, *args)
        assert broken.code == 1, (args, broken.stdout)
        assert broken.stderr.startswith(f"BROKEN line {line}: entry missing"), broken.stderr
        assert f"segment {sealed[-1][0]}'s signed seal vouches for {sealed[-1][2]}" in (
            broken.stderr
        )


def test_parallel_ranges_find_the_same_line_as_one_pass(
    tmp_path, run_inproc, pg_store_env, pg_server, monkeypatch
):
    from ledger.edges.postgres import verifyrows

    home = _host(tmp_path, run_inproc, pg_store_env)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    _append(home, 14, pg_store_env)
    monkeypatch.setattr(verifyrows, "_PARALLEL_MIN_ROWS", 1)
    runtime = Runtime(home, pg_store_env)
    trust = runtime.keys.load_trust()
    total = len(_rows(pg_server, schema))
    whole = runtime.pg_chain.verify(trust, workers=3)
    assert (whole.ok, whole.entries) == (True, total)
    _edit_row(pg_server, schema, 9)
    for workers in (1, 3):
        report = runtime.pg_chain.verify(trust, workers=workers)
        assert (report.ok, report.line) == (False, 9), (workers, report)


def test_a_writer_commits_while_a_verification_reads(tmp_path, run_inproc, pg_store_env, pg_server):
    home = _host(tmp_path, run_inproc, pg_store_env)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    _append(home, 12, pg_store_env)
    before = len(_rows(pg_server, schema))
    runtime = Runtime(home, pg_store_env)
    seen: list[tuple[int, int, int]] = []

    def midway(done: int, total: int) -> None:
        if seen:
            return
        # The verification's snapshot is open here. A writer in another process
        # appends and commits (a one-second lock timeout: it would fail, not
        # hang, if the verification held the chain's lock).
        writer = subprocess.run(
            [sys.executable, "-m", "ledger", "--home", str(home), "verdict", "1"],
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "LEDGER_NOW": NOW,
                 "LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS": "1", **CAP_ENV, **pg_store_env},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert writer.returncode == 0, writer.stdout + writer.stderr
        advisory = pg_server.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
        seen.append((done, len(_rows(pg_server, schema)), int(advisory[0][0])))

    report = runtime.pg_chain.verify(runtime.keys.load_trust(), workers=1, progress=midway)
    done, rows_then, advisory_locks = seen[0]
    assert done < report.lines or done == 0 or rows_then > before  # called mid-verification
    assert rows_then > before  # the writer's entry committed while the snapshot was open
    assert advisory_locks == 0  # nobody, the verification included, held the chain's lock
    assert (report.ok, report.entries) == (True, before)  # the snapshot, not the new rows


def test_store_migrate_keeps_the_file_homes_segment_boundaries(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    home = tmp_path / "home"
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "20"]).code == 0
    seal_every(home, 4)
    _append(home, 10)
    manifests = sorted((home / "segments").glob("0*.json"))
    assert len(manifests) >= 2
    expected = []
    for path in manifests:
        document = json.loads(path.read_text())
        first = int(document["first_line"])
        expected.append((first, first + int(document["lines"]) - 1))
    url, schema = pg_store_env["LEDGER_STORE_URL"], pg_store_env["LEDGER_STORE_SCHEMA"]
    moved = run_inproc(["--home", str(home), "store", "migrate", "--to", url, "--schema", schema])
    assert moved.code == 0, moved.stderr
    assert moved.json()["segments"] == len(manifests)
    sealed = _segments(pg_server, schema)
    assert [(first, last) for _n, first, last, _h, _c in sealed] == expected
    rows = _rows(pg_server, schema)
    for _n, _first, last, head, _c in sealed:
        assert head == entry_hash(rows[last - 1])
    run = run_inproc(["--home", str(home), "verify-chain", "--full"], {})
    assert run.stdout == f"OK {len(rows)} entries\n", run.stderr


def test_an_older_schema_is_refused_until_one_hosts_init_upgrades_it(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    store_of_release(pg_server.url, schema, 4)  # a fleet made by the previous release
    home = tmp_path / "host"
    home.mkdir()
    (home / "ledger.toml").write_text(
        f'[usd]\ndaily_cap = 50\n[store]\nurl = "{pg_server.url}"\nschema = "{schema}"\n'
        "[chain]\nsegment_entries = 3\n"
    )
    halted = _run(run_inproc, home, "verdict", "1")
    assert halted.code == 1
    assert (
        "schema version 4, older than this ledger needs (5); run `ledger init` on one host"
        in (halted.json()["diagnostic"])
    )
    upgraded = run_inproc(["--home", str(home), "init"], {})
    assert upgraded.code == 0, upgraded.stderr
    versions = pg_server.sql(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert versions == [(4,), (5,)]
    _append(home, 4, pg_store_env)
    assert _segments(pg_server, schema)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="appended only"):
        pg_server.sql(f'DELETE FROM "{schema}".segments')


def test_a_seal_the_role_may_not_write_leaves_the_append_standing(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    from tests.integration.test_pg_faults import _grant_roles
    from tests.pg import copy_fleet_secret

    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    admin = _host(tmp_path / "admin", run_inproc, pg_store_env, seal_at=None)
    _grant_roles(pg_server, schema)
    pg_server.sql(f'REVOKE INSERT ON "{schema}".segments FROM ledger_app')
    app_env = {**pg_store_env, "LEDGER_STORE_URL": pg_server.url_for("ledger_app")}
    copy_fleet_secret(admin, tmp_path / "app" / "host")
    home = _host(tmp_path / "app", run_inproc, app_env)
    _append(home, 5, app_env)  # each append stands; no seal is written
    rows = len(_rows(pg_server, schema))
    assert rows >= 5
    assert _segments(pg_server, schema) == []
    pg_server.sql(f'GRANT INSERT ON "{schema}".segments TO ledger_app')
    _append(home, 1, app_env)  # the next append seals everything open so far
    assert [(first, last) for _n, first, last, _h, _c in _segments(pg_server, schema)] == [
        (1, rows + 1)
    ]


def test_recover_retires_the_seals_of_rows_it_moves_away(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    home = _host(tmp_path, run_inproc, pg_store_env)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    _append(home, 8, pg_store_env)
    sealed = _segments(pg_server, schema)
    _edit_row(pg_server, schema, sealed[0][2] + 1)  # the first row after the first seal
    recovered = _run(run_inproc, home, "recover")
    assert recovered.code == 0, recovered.stderr
    kept = _segments(pg_server, schema)
    assert kept[0] == sealed[0]
    assert all(last <= len(_rows(pg_server, schema)) for _n, _f, last, _h, _c in kept)
    reasons = pg_server.sql(f'SELECT reason FROM "{schema}".evidence')
    assert ("the seal of a segment no longer in the chain",) in reasons
    assert _run(run_inproc, home, "verify-chain", "--full").code == 0
    _append(home, 4, pg_store_env)  # sealing goes on after the kept seal
    assert _run(run_inproc, home, "verify-chain").code == 0


def test_a_batch_of_verdicts_seals_as_single_appends_do(
    tmp_path, run_inproc, pg_store_env, pg_server
):
    from ledger.batching import BatchRunner
    from ledger.services.gate.gate import check_verdict

    home = _host(tmp_path, run_inproc, pg_store_env)
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    logged: list[str] = []
    runner = BatchRunner(home, {"LEDGER_NOW": NOW, **CAP_ENV, **pg_store_env}, logged.append)

    def batch(runtime: Runtime) -> list[object]:
        return [check_verdict(runtime, 10_000) for _ in range(8)]

    outcomes = runner.run(batch, lambda: None)
    assert logged == []
    assert all(outcome.verdict_ref is not None for outcome in outcomes)  # type: ignore[attr-defined]
    rows = _rows(pg_server, schema)
    sealed = _segments(pg_server, schema)
    assert [(first, last) for _n, first, last, _h, _c in sealed] == [
        (1 + 3 * i, 3 + 3 * i) for i in range(len(rows) // 3)
    ]
    for _n, _first, last, head, _c in sealed:
        assert head == entry_hash(rows[last - 1])
    assert _run(run_inproc, home, "verify-chain", "--full").stdout == f"OK {len(rows)} entries\n"
