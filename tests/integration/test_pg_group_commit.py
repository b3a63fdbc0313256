# ruff: noqa: S608 - schema names are the tests' own identifiers
"""Group commit on a fleet's PostgreSQL store (SPEC §8, §16), in-process against a real server.

A batch of decisions is one database transaction: one commit for all of them,
each unit all-or-nothing in a savepoint of its own, the billing observer run
outside the fleet-wide chain lock, and a failed commit never drops or double
counts a decision.
"""

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.batching import BatchRunner
from ledger.core.envelope import parse_line
from ledger.edges.postgres.connection import lock_key
from ledger.runtime import Runtime
from ledger.services.gate.figures import usage
from ledger.services.gate.gate import check_verdict
from tests.gate_helpers import use_observer
from tests.gateway.helpers import NOW
from tests.integration.test_pg_faults import init_host

pytestmark = pytest.mark.timeout(180)

VERDICTS = ("budget.allow", "budget.warn_90", "budget.halt_100", "budget.halt_uncertainty")


class FailedUnitError(Exception):
    """A unit of work that fails after it wrote."""


@pytest.fixture
def host(pg_server, pg_store_env, tmp_path: Path) -> Path:
    home = tmp_path / "host"
    init_host(home, pg_server.url, pg_store_env["LEDGER_STORE_SCHEMA"])
    return home


def _runner(home: Path, **env: str) -> tuple[BatchRunner, list[str]]:
    logged: list[str] = []
    return BatchRunner(home, {"LEDGER_NOW": NOW, **env}, logged.append), logged


def _verdict_rows(pg_server, schema: str) -> list[tuple[dict[str, Any], str, object]]:
    """Each verdict row: its entry, its hash, and when its transaction committed."""
    rows = pg_server.sql(
        f'SELECT line, pg_xact_commit_timestamp(xmin) FROM "{schema}".chain ORDER BY seq'
    )
    found = []
    for line, committed in rows:
        raw = bytes(line).rstrip(b"\n")
        entry = json.loads(raw)
        if entry["event_type"] in VERDICTS:
            found.append((entry, parse_line(raw).entry_hash, committed))
    return found


def test_a_batch_of_verdicts_is_one_commit(host, pg_server, pg_store_env):
    runner, logged = _runner(host, LEDGER_BILLING_STALE_HALT_PCT="100")

    def batch(runtime: Runtime) -> list[Any]:
        return [check_verdict(runtime, micros) for micros in (1_000_000, 2_000_000, 3_000_000)]

    outcomes = runner.run(batch, lambda: None)
    assert logged == []
    verdicts = _verdict_rows(pg_server, pg_store_env["LEDGER_STORE_SCHEMA"])
    assert [o.verdict_ref for o in outcomes] == [entry_hash for _, entry_hash, _ in verdicts]
    assert len({committed for _, _, committed in verdicts}) == 1, "one commit for the batch"


def test_a_unit_that_fails_after_writing_leaves_nothing_and_every_other_lands_once(
    host, pg_server, pg_store_env
):
    runner, logged = _runner(host, LEDGER_BILLING_STALE_HALT_PCT="100")

    def failing(runtime: Runtime) -> None:
        # Seals a verdict, then fails before the unit ends: none of it may stay.
        with runtime.database.transaction():
            check_verdict(runtime, 7_000_000)
            raise FailedUnitError

    def batch(runtime: Runtime) -> list[Any]:
        outcomes: list[Any] = [check_verdict(runtime, 1_000_000)]
        with pytest.raises(FailedUnitError):
            failing(runtime)
        outcomes += [check_verdict(runtime, 2_000_000), check_verdict(runtime, 3_000_000)]
        return outcomes

    outcomes = runner.run(batch, lambda: None)
    assert any("failed half-way" in line for line in logged), logged
    verdicts = _verdict_rows(pg_server, pg_store_env["LEDGER_STORE_SCHEMA"])
    assert [o.verdict_ref for o in outcomes] == [entry_hash for _, entry_hash, _ in verdicts]
    reserved = [entry["payload"]["reservation"]["micros"] for entry, _, _ in verdicts]
    assert reserved == [1_000_000, 2_000_000, 3_000_000]
    # The derived state agrees: the failed unit's reservation is not counted.
    figures = usage(Runtime(host, {"LEDGER_NOW": NOW}))
    assert figures.aggregate.reserved_micros == 6_000_000


OBSERVER = """
import json, sys
import psycopg
url, schema, key, out = sys.argv[1:5]
with psycopg.connect(url, autocommit=True) as conn:
    free = conn.execute("SELECT pg_try_advisory_lock(%s)", (int(key),)).fetchone()[0]
    if free:
        conn.execute("SELECT pg_advisory_unlock(%s)", (int(key),))
    rows = conn.execute(f'SELECT count(*) FROM "{schema}".chain').fetchone()[0]
with open(out, "w") as found:
    json.dump({"free": free, "rows": rows}, found)
print(json.dumps({"_unreachable": True, "_reason": "a test observer"}))
"""


def test_the_billing_observer_runs_outside_the_fleet_lock_after_the_batch_so_far_is_durable(
    host, pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    script, seen = tmp_path / "observer.py", tmp_path / "seen.json"
    script.write_text(OBSERVER)
    argv = [sys.executable, str(script), pg_server.url, schema, str(lock_key(schema)), str(seen)]
    use_observer(host, argv)
    before = pg_server.sql(f'SELECT count(*) FROM "{schema}".chain')[0][0]
    # Above 1 % of the cap, a verdict wants a fresh reading from the observer.
    runner, _ = _runner(host, LEDGER_BILLING_STALE_HALT_PCT="1")
    durable: list[int] = []

    def batch(runtime: Runtime) -> list[Any]:
        first = check_verdict(runtime, 5_000_000)  # 10 % of the $50 cap: no reading needed
        return [first, check_verdict(runtime, 1_000_000)]

    first, second = runner.run(batch, lambda: None, lambda: durable.append(1))
    assert first.verdict_ref is not None
    assert second.verdict_ref is not None
    assert json.loads(seen.read_text()) == {"free": True, "rows": before + 1}
    assert durable, "the caller was told the first verdict was durable early"
    verdicts = _verdict_rows(pg_server, schema)
    assert [entry_hash for _, entry_hash, _ in verdicts][-2:] == [
        first.verdict_ref,
        second.verdict_ref,
    ]


def test_a_batch_whose_connection_dies_before_its_commit_runs_again_and_counts_each_once(
    host, pg_server, pg_store_env
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    runner, logged = _runner(host, LEDGER_BILLING_STALE_HALT_PCT="100")
    killed: list[int] = []

    def batch(runtime: Runtime) -> list[Any]:
        outcomes: list[Any] = [check_verdict(runtime, 1_000_000)]
        if not killed:  # the database drops the connection once (waiting until it is gone)
            killed.extend(
                row[0]
                for row in pg_server.sql(
                    "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity"
                    " WHERE application_name = 'ledger' AND pid <> pg_backend_pid()"
                )
            )
        outcomes.append(check_verdict(runtime, 2_000_000))
        return outcomes

    first, second = runner.run(batch, lambda: None)
    assert killed == [True]
    assert any("group commit failed" in line for line in logged), logged
    verdicts = _verdict_rows(pg_server, schema)
    assert [entry_hash for _, entry_hash, _ in verdicts] == [first.verdict_ref, second.verdict_ref]
    reserved = [entry["payload"]["reservation"]["micros"] for entry, _, _ in verdicts]
    assert reserved == [1_000_000, 2_000_000]
    figures = usage(Runtime(host, {"LEDGER_NOW": NOW}))
    assert figures.aggregate.reserved_micros == 3_000_000


def test_a_failure_after_the_observer_runs_again_only_what_was_not_yet_durable(
    host, pg_server, pg_store_env, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    script, seen = tmp_path / "observer.py", tmp_path / "seen.json"
    script.write_text(OBSERVER)
    argv = [sys.executable, str(script), pg_server.url, schema, str(lock_key(schema)), str(seen)]
    use_observer(host, argv)
    runner, logged = _runner(host, LEDGER_BILLING_STALE_HALT_PCT="1")
    # What the gateway and the resident gate do: a unit durable is never run again.
    amounts = [5_000_000, 1_000_000, 2_000_000]
    outcomes: dict[int, Any] = {}
    durable: set[int] = set()
    killed: list[bool] = []

    def batch(runtime: Runtime) -> None:
        for index, micros in enumerate(amounts):
            if index in durable:
                continue
            if index == 2 and not killed:  # after the observer's early commit
                killed.extend(
                    row[0]
                    for row in pg_server.sql(
                        "SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity"
                        " WHERE application_name = 'ledger' AND pid <> pg_backend_pid()"
                    )
                )
            outcomes[index] = check_verdict(runtime, micros)

    runner.run(batch, lambda: None, lambda: durable.update(outcomes))
    assert killed == [True]
    assert any("group commit failed" in line for line in logged), logged
    assert durable == {0}, "the first verdict was committed before the observer ran"
    verdicts = _verdict_rows(pg_server, schema)
    assert [o.verdict_ref for o in outcomes.values()] == [h for _, h, _ in verdicts]
    estimates = [entry["payload"]["estimated_micros"] for entry, _, _ in verdicts]
    assert estimates == amounts, "each verdict sealed once: none lost, none twice"


def test_decisions_that_arrive_while_a_batch_waits_for_the_fleet_lock_join_that_batch(
    host, pg_server, pg_store_env
):
    """Another host holds the lock; what queues meanwhile is decided in the same commit."""
    import asyncio
    import time

    import psycopg

    from ledger.gateway.committer import Committer

    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    logged: list[str] = []
    committer = Committer(host, {"LEDGER_NOW": NOW, "LEDGER_BILLING_STALE_HALT_PCT": "100"},
                          logged.append)  # fmt: skip
    committer.requests = 8  # several requests being answered: no job runs inline
    committer.start()

    def waiting_for_the_lock() -> bool:
        return bool(pg_server.sql(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ledger'"
            " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
        )[0][0])  # fmt: skip

    def verdict(micros: int) -> Any:
        return lambda runtime: check_verdict(runtime, micros)

    async def scenario() -> list[Any]:
        with psycopg.connect(pg_server.url, autocommit=True) as other_host:
            other_host.execute("SELECT pg_advisory_lock(%s)", (lock_key(schema),))
            first = asyncio.ensure_future(committer.run(verdict(1_000_000)))
            deadline = time.monotonic() + 60
            while not await asyncio.to_thread(waiting_for_the_lock):
                assert time.monotonic() < deadline, "the batch never waited for the lock"
                await asyncio.sleep(0.05)
            later = [
                asyncio.ensure_future(committer.run(verdict(m))) for m in (2_000_000, 3_000_000)
            ]
            await asyncio.sleep(0)  # both queued behind the waiting batch
            other_host.execute("SELECT pg_advisory_unlock(%s)", (lock_key(schema),))
        return list(await asyncio.gather(first, *later))

    try:
        outcomes = asyncio.run(scenario())
    finally:
        committer.stop()
    assert logged == []
    assert committer.batches == 1, "the decisions that queued meanwhile joined the batch"
    verdicts = _verdict_rows(pg_server, schema)
    assert [o.verdict_ref for o in outcomes] == [entry_hash for _, entry_hash, _ in verdicts]
    assert len({committed for _, _, committed in verdicts}) == 1, "one commit for the three"


def test_a_batch_of_verdicts_holds_the_fleet_lock_for_two_round_trips(
    host, pg_server, pg_store_env
):
    """The lock with what decisions read, then every write with the commit: nothing per decision."""
    import psycopg

    runner, logged = _runner(host, LEDGER_BILLING_STALE_HALT_PCT="100")
    runtime = Runtime(host, {"LEDGER_NOW": NOW})
    check_verdict(runtime, 1_000_000)  # connected, the schema checked, the state saved
    conn = runtime.database.connection()
    trace = host / "libpq.trace"

    def batch(runtime: Runtime) -> list[Any]:
        return [check_verdict(runtime, micros) for micros in (1_000_000, 2_000_000, 3_000_000)]

    with trace.open("w") as sink:
        conn.pgconn.trace(sink.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            outcomes = runner.run(batch, lambda: None)
        finally:
            conn.pgconn.untrace()
    assert logged == []
    assert all(outcome.verdict_ref for outcome in outcomes)
    messages = [line.split("\t") for line in trace.read_text().splitlines()]
    # Each Sync (or simple Query) from this side is one wait for the server: the
    # lock with what decisions read, the newest sealed caps (once a batch, held
    # against the caps in force, SPEC §21), then every write with the commit.
    round_trips = [m for m in messages if m[0] == "F" and m[2].split(" ")[0] in {"Sync", "Query"}]
    assert len(round_trips) == 3, round_trips
    assert trace.read_text().count("WHERE event_type = $1 ORDER BY seq DESC LIMIT 1") == 1


def test_a_key_recorded_earlier_in_the_same_batch_is_a_repeat_and_counted_once(
    host, pg_server, pg_store_env
):
    """Later units see what earlier ones wrote even before it reached the database."""
    from ledger.services.gate.recording import record_call

    runner, logged = _runner(host, LEDGER_BILLING_STALE_HALT_PCT="100")

    def batch(runtime: Runtime) -> list[Any]:
        return [
            record_call(runtime, 1_000_000, "anthropic", idempotency_key="anthropic:msg_1"),
            check_verdict(runtime, 2_000_000),  # its writes held with the record's
            record_call(runtime, 1_000_000, "anthropic", idempotency_key="anthropic:msg_1"),
            record_call(runtime, 3_000_000, "anthropic", idempotency_key="anthropic:msg_2"),
        ]

    first, _, again, other = runner.run(batch, lambda: None)
    assert logged == []
    assert not first.duplicate
    assert again.duplicate
    assert again.entry_hash == first.entry_hash
    assert not other.duplicate
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    lines = [bytes(r[0]) for r in pg_server.sql(f'SELECT line FROM "{schema}".chain ORDER BY seq')]
    keys = [
        json.loads(line)["payload"].get("idempotency_key")
        for line in lines
        if json.loads(line)["event_type"] == "budget.record_call"
    ]
    assert keys == ["anthropic:msg_1", "anthropic:msg_2"]
    figures = usage(Runtime(host, {"LEDGER_NOW": NOW}))
    assert figures.aggregate.local_micros == 4_000_000
