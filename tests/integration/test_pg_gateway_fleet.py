# ruff: noqa: S608 - schema names are the tests' own identifiers
"""Gateways on several hosts sharing one PostgreSQL store (SPEC §8, §16).

Real `ledger proxy` processes, each with its own home, all pointing at one
schema of a real PostgreSQL server (``tests.pg``), under concurrent load
against the fake provider: the cap is never overshot, every forwarded call is
recorded exactly once, and the hosts' decisions share transactions (group
commit on the database).
"""

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.helpers import (
    Upstream,
    anthropic_body,
    start_proxy,
    start_upstream,
    write_config,
)
from tests.integration.test_pg_faults import init_host
from tests.pg import copy_fleet_secret

pytestmark = pytest.mark.timeout(300)

HOSTS = 3
CLIENTS_PER_HOST = 8
CALLS_PER_CLIENT = 2
CAP_MICROS = 100_000  # $0.10: about seven calls of $0.0135 each

VERDICTS = {"budget.allow", "budget.warn_90", "budget.halt_100", "budget.halt_uncertainty"}


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = start_upstream()
    yield server
    server.stop()


def _fleet(root: Path, url: str, schema: str, upstream: Upstream) -> list[Path]:
    homes = [root / f"host{index}" for index in range(HOSTS)]
    init_host(homes[0], url, schema, cap="0.10")
    for home in homes[1:]:
        copy_fleet_secret(homes[0], home)
        init_host(home, url, schema, cap="0.10")
    for home in homes:
        write_config(home, upstream.url, cap_usd="0.10")
        with (home / "ledger.toml").open("a") as config:
            config.write(f'\n[store]\nurl = "{url}"\nschema = "{schema}"\n')
    return homes


def _entries(pg_server, schema: str) -> list[dict[str, Any]]:
    rows = pg_server.sql(f'SELECT line FROM "{schema}".chain ORDER BY seq')
    return [json.loads(bytes(line)) for (line,) in rows]


def test_gateways_on_several_hosts_never_overshoot_and_record_every_call_once(
    pg_server, pg_store_env, upstream, tmp_path
):
    schema = pg_store_env["LEDGER_STORE_SCHEMA"]
    homes = _fleet(tmp_path, pg_server.url, schema, upstream)
    proxies = [start_proxy(home, "--listen", "127.0.0.1:0") for home in homes]
    statuses: list[int] = []
    lock = threading.Lock()

    def client(url: str) -> None:
        with httpx.Client(timeout=120) as http:
            for _ in range(CALLS_PER_CLIENT):
                answer = http.post(
                    f"{url}/v1/messages", content=anthropic_body(),
                    headers={"anthropic-version": "2023-06-01", "x-api-key": "sk-test"},
                )  # fmt: skip
                with lock:
                    statuses.append(answer.status_code)

    threads = [
        threading.Thread(target=client, args=(proxy.url,))
        for proxy in proxies
        for _ in range(CLIENTS_PER_HOST)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
    finally:
        for proxy in proxies:
            assert proxy.stop() == 0, proxy.lines
    assert len(statuses) == HOSTS * CLIENTS_PER_HOST * CALLS_PER_CLIENT
    assert set(statuses) <= {200, 402}, statuses
    admitted = statuses.count(200)
    assert admitted >= 1
    forwarded = upstream.requests()
    assert len(forwarded) == admitted
    entries = _entries(pg_server, schema)
    records = [e["payload"] for e in entries if e["event_type"] == "budget.record_call"]
    keys = [record["idempotency_key"] for record in records]
    assert len(keys) == admitted, "every forwarded call is recorded"
    assert len(set(keys)) == len(keys), "and none twice"
    spent = sum(record["actual_micros"] for record in records)
    assert spent <= CAP_MICROS
    verdicts = [e for e in entries if e["event_type"] in VERDICTS]
    assert len(verdicts) == len(statuses)
    # Decisions were committed together: rows share their transaction's commit
    # (a row written in a savepoint carries the savepoint's id, committed with it).
    commits = pg_server.sql(
        f'SELECT count(DISTINCT pg_xact_commit_timestamp(xmin)) FROM "{schema}".chain'
    )
    assert commits[0][0] < len(entries)
