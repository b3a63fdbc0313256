# ruff: noqa: S608 - schema names are the tests' own identifiers
"""A chain known to be broken stays broken: after a BROKEN finding every verdict halts.

The gate folds the chain incrementally, so a line edited in place after it was
folded (same length, same head) goes unseen by verdicts; a full verification
sees it, and its finding is kept where every verdict looks, on both stores,
until ``ledger recover`` has restored a verifying chain.
"""

from pathlib import Path
from typing import Any

import pytest

import ledger as ledger_api
from tests.gate_helpers import env_at
from tests.integration.test_agent_helpers import cli
from tests.pg import STORES, copy_fleet_secret

SPENT = '"actual_micros":2000000'
EDITED = '"actual_micros":1000000'


def _spend(run_inproc: Any, home: Path, times: int = 3) -> None:
    for _ in range(times):
        ref = cli(run_inproc, home, "verdict", "2", "--provider", "openai", env=env_at())
        assert ref.code == 0, ref.stderr
        recorded = cli(run_inproc, home, "record", "2", "--provider", "openai",
                       "--verdict-ref", ref.json()["verdict_ref"], env=env_at())  # fmt: skip
        assert recorded.code == 0, recorded.stderr


def _on_postgres(home: Path) -> bool:
    return "\n[store]\n" in (home / "ledger.toml").read_text()


def _edit_second_record(home: Path, request: pytest.FixtureRequest) -> int:
    """Halve the second record's spend in place (same length); returns its line number."""
    if _on_postgres(home):
        import psycopg

        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_store_env")["LEDGER_STORE_SCHEMA"]
        rows = server.sql(f'SELECT seq, line FROM "{schema}".chain ORDER BY seq')
        seq = [s for s, line in rows if SPENT.encode() in bytes(line)][1]
        with psycopg.connect(server.url, autocommit=True) as conn:
            # Anyone may set this, as recover does: the tamper note stays silent.
            conn.execute("SET ledger.recovering = 'on'")
            conn.execute(
                f'UPDATE "{schema}".chain SET line = convert_to(replace('
                f"convert_from(line, 'UTF8'), %s, %s), 'UTF8') WHERE seq = %s",
                (SPENT, EDITED, seq),
            )
        return int(seq)
    chain = home / "events.jsonl"
    lines = chain.read_text().splitlines(keepends=True)
    number = [n for n, line in enumerate(lines, 1) if SPENT in line][1]
    lines[number - 1] = lines[number - 1].replace(SPENT, EDITED)
    chain.write_text("".join(lines))
    return number


def _halts_naming(result: Any, line: int) -> None:
    assert result.code == 1, result.stdout
    body = result.json()
    assert (body["verdict"], body["uncertainty_reason"]) == (
        "halt-uncertainty", "counter_inconsistent",
    )  # fmt: skip
    assert f"line {line}" in body["diagnostic"], body["diagnostic"]


@STORES
def test_an_edited_line_halts_every_verdict_once_verify_chain_finds_it(home, run_inproc, request):
    _spend(run_inproc, home)
    line = _edit_second_record(home, request)
    before = cli(run_inproc, home, "verdict", "0.5", env=env_at())
    assert before.json()["verdict"] == "allow"  # the incremental gate cannot see it

    broken = cli(run_inproc, home, "verify-chain", env=env_at())
    assert (broken.code, broken.stderr) == (1, f"BROKEN line {line}: signature does not verify\n")
    _halts_naming(cli(run_inproc, home, "verdict", "0.5", env=env_at()), line)
    _halts_naming(
        cli(run_inproc, home, "verdict", "0.5", "--provider", "openai", env=env_at()), line
    )
    assert cli(run_inproc, home, "usage", env=env_at()).json()["uncertainty_reason"] == (
        "counter_inconsistent"
    )
    refused = cli(run_inproc, home, "rebuild-state", env=env_at())
    assert refused.code == 1
    assert "ledger recover" in refused.stderr

    recovered = cli(run_inproc, home, "recover", env=env_at())
    assert recovered.code == 0, recovered.stderr
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 0
    assert cli(run_inproc, home, "verdict", "0.5", env=env_at()).json()["verdict"] == "allow"


@STORES
def test_every_host_of_the_store_halts(home, run_inproc, request, tmp_path):
    if not _on_postgres(home):
        pytest.skip("one host per home on the file store")
    second = tmp_path / "second"
    env = request.getfixturevalue("pg_store_env")
    copy_fleet_secret(home, second)
    assert cli(run_inproc, second, "init", "--daily-cap-usd", "100", env=env).code == 0
    _spend(run_inproc, home)
    line = _edit_second_record(home, request)
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 1
    _halts_naming(cli(run_inproc, second, "verdict", "0.5", env=env_at()), line)


def test_deleting_or_editing_the_state_does_not_lift_the_halt(home, run_inproc, request):
    _spend(run_inproc, home)
    line = _edit_second_record(home, request)
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 1
    derived = home / "state" / "derived.json"
    text = derived.read_text()
    assert '"broken":{"line":' in text  # the finding lives in the authenticated derived state
    derived.write_text(text.replace('"broken"', '"brokeN"'))
    halted = cli(run_inproc, home, "verdict", "0.5", env=env_at())
    assert halted.json()["uncertainty_reason"] == "counter_inconsistent"
    for path in sorted((home / "state").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    _halts_naming(cli(run_inproc, home, "verdict", "0.5", env=env_at()), line)


def test_only_recover_clears_it_even_once_the_line_is_put_back(home, run_inproc, request):
    _spend(run_inproc, home)
    chain = home / "events.jsonl"
    original = chain.read_bytes()
    line = _edit_second_record(home, request)
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 1
    chain.write_bytes(original)  # the edit undone by hand
    _halts_naming(cli(run_inproc, home, "verdict", "0.5", env=env_at()), line)
    # A state rebuilt for another budget-day zone carries the finding over.
    zoned = env_at(LEDGER_USD_DAY_TIMEZONE="Europe/Berlin")
    _halts_naming(cli(run_inproc, home, "verdict", "0.5", env=zoned), line)
    recovered = cli(run_inproc, home, "recover", env=env_at())
    assert recovered.code == 0, recovered.stderr
    assert recovered.json()["action"] == "none"
    assert cli(run_inproc, home, "verdict", "0.5", env=env_at()).json()["verdict"] == "allow"


def test_verify_chain_of_another_log_or_trust_leaves_the_gate_alone(home, run_inproc, request):
    _spend(run_inproc, home)
    _edit_second_record(home, request)
    copy = home.parent / "copy.jsonl"
    copy.write_bytes((home / "events.jsonl").read_bytes())
    assert cli(run_inproc, home, "verify-chain", str(copy), env=env_at()).code == 1
    assert cli(run_inproc, home, "verify-chain", "--strict", env=env_at()).code == 1
    stranger = home.parent / "stranger.pub.pem"
    from ledger.core.signing import public_pem
    from ledger.edges.files.keyfiles import KeyDir
    from tests.helpers.chains import signer as fixed_signer

    key_id = KeyDir(home).load_trust().keys[0].key_id
    stranger.write_bytes(public_pem(fixed_signer(77).public_raw))
    with_key = cli(run_inproc, home, "verify-chain", "--key", f"{key_id}={stranger}", env=env_at())
    assert with_key.code == 1
    assert cli(run_inproc, home, "verdict", "0.5", env=env_at()).json()["verdict"] == "allow"


def test_the_python_api_halts_too(home, run_inproc, request, monkeypatch):
    _spend(run_inproc, home)
    line = _edit_second_record(home, request)
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 1
    for key, value in env_at().items():
        monkeypatch.setenv(key, value)
    verdict = ledger_api.open(home=home).verdict(0.5, provider="openai")
    assert (verdict.verdict, verdict.uncertainty_reason) == (
        "halt-uncertainty", "counter_inconsistent",
    )  # fmt: skip
    assert f"line {line}" in verdict.diagnostic


def test_the_served_gate_and_the_hook_halt_too(tmp_path, run_inproc, request):
    from tests.conftest import clean_env
    from tests.integration.server_helpers import init_home, ledger, start_server
    from tests.integration.test_hooks import pre

    home = init_home(tmp_path / "home")
    _spend(run_inproc, home)
    line = _edit_second_record(home, request)
    served = clean_env(**env_at())
    server = start_server(home)
    try:
        assert ledger(home, "verdict", "0.5", env=served).json()["verdict"] == "allow"
        assert ledger(home, "verify-chain", env=served).code == 1
        after = ledger(home, "verdict", "0.5", env=served)
    finally:
        assert server.stop() == 0
    assert server.served_count() == 2
    _halts_naming(after, line)
    denied = pre(run_inproc, home, env_at())
    stopped = denied.json()
    assert stopped["continue"] is False
    assert "counter_inconsistent" in stopped["stopReason"]


def _keep_state(home: Path, request: pytest.FixtureRequest) -> Any:
    """A copy of the derived state as it is now, and a way to put it back later."""
    if _on_postgres(home):
        import psycopg

        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_store_env")["LEDGER_STORE_SCHEMA"]
        (row,) = server.sql(f'SELECT head_seq, head_hash, size, body FROM "{schema}".derived_state')

        def put_back_row() -> None:
            with psycopg.connect(server.url, autocommit=True) as conn:
                conn.execute(
                    f'UPDATE "{schema}".derived_state SET head_seq = %s, head_hash = %s, '
                    "size = %s, body = %s WHERE id = 1",
                    row,
                )

        return put_back_row
    kept = {path: path.read_bytes() for path in (home / "state").rglob("*") if path.is_file()}

    def put_back_files() -> None:
        for path in (home / "state").rglob("*"):
            if path.is_file() and path not in kept:
                path.unlink()
        for path, data in kept.items():
            path.write_bytes(data)

    return put_back_files


def _chain_text(home: Path, request: pytest.FixtureRequest) -> str:
    if _on_postgres(home):
        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_store_env")["LEDGER_STORE_SCHEMA"]
        rows = server.sql(f'SELECT line FROM "{schema}".chain ORDER BY seq')
        return "".join(bytes(line).decode() for (line,) in rows)
    return (home / "events.jsonl").read_text()


@STORES
def test_an_older_state_put_back_cannot_hide_the_sealed_finding(home, run_inproc, request):
    _spend(run_inproc, home)
    line = _edit_second_record(home, request)
    assert cli(run_inproc, home, "verdict", "0.5", env=env_at()).json()["verdict"] == "allow"
    put_back = _keep_state(home, request)  # the state at the same head, before the finding
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 1
    tail = _chain_text(home, request).splitlines()[-1]
    assert '"event_type":"chain.finding"' in tail
    assert f'"line":{line}' in tail
    assert cli(run_inproc, home, "verify-chain", env=env_at()).code == 1
    assert _chain_text(home, request).count('"chain.finding"') == 1  # sealed once
    put_back()
    halted = cli(run_inproc, home, "verdict", "0.5", env=env_at())
    _halts_naming(halted, line)
    assert "ledger recover" in halted.json()["diagnostic"]
    assert "rebuild-state" not in halted.json()["diagnostic"]
    recovered = cli(run_inproc, home, "recover", env=env_at())
    assert recovered.code == 0, recovered.stderr
    assert cli(run_inproc, home, "verdict", "0.5", env=env_at()).json()["verdict"] == "allow"
