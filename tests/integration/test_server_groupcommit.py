"""The server's batches (ledger.server.batches): group commit, and a failed group fsync."""

import errno
import json
import os
from pathlib import Path
from typing import Any

from ledger.cli.percall.parser import build_parser
from ledger.cli.percall.served import execute
from ledger.server.batches import Batches
from ledger.server.protocol import STATUS_OK, Reply
from tests.integration.server_helpers import assert_verifies, entries
from tests.integration.test_server_lifecycle import raw_request


def _server(home: Path) -> Batches:
    parser = build_parser()
    lines: list[str] = []
    return Batches(home, lambda request: execute(request, parser), lines.append)


def _documents(replies: list[bytes], codes: tuple[int, ...] = (0,)) -> list[dict[str, Any]]:
    decoded = [Reply.decode(data[8:]) for data in replies]
    assert all(reply.status == STATUS_OK and reply.code in codes for reply in decoded)
    return [json.loads(reply.writes[-1][1]) for reply in decoded]


def test_a_batch_is_decided_in_order_in_one_group(home: Path):
    """Each request in a batch sees the ones before it (each decision atomic with its
    reservation), and the batch's entries all land."""
    server = _server(home)
    requests = [raw_request(home, "verdict", "40", request_id=f"rq-{i}") for i in range(3)]
    documents = _documents(server.run(requests), codes=(0, 1))
    assert [d["usd_reserved"] for d in documents] == [0.0, 40.0, 80.0]
    assert [d["verdict"] for d in documents][:2] == ["allow", "allow"]
    assert documents[2]["verdict"] != "allow"  # 120 of a $100 cap
    assert len(entries(home)) == 3


def test_a_failed_group_fsync_decides_the_batch_again_one_by_one(home: Path, monkeypatch):
    """The group's fsync fails once: its entries are removed, derived state is dropped,
    and each request is decided again with its own fsync; nothing counted twice."""
    server = _server(home)
    assert _documents(server.run([raw_request(home, "usage", request_id="rq-u")]))
    first = raw_request(home, "record", "0.5", "--provider", "openai", request_id="rq-first")
    assert _documents(server.run([first]))[0]["duplicate"] is False
    chain = home / "events.jsonl"
    real = os.fsync
    failed: list[int] = []

    def fail_the_groups_fsync(fd: int) -> None:
        if not failed and os.fstat(fd).st_ino == chain.stat().st_ino:
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fail_the_groups_fsync)
    requests = [
        raw_request(home, "record", "0.25", "--provider", "openai", request_id=f"rq-{i}")
        for i in range(3)
    ]
    documents = _documents(server.run(requests))
    assert failed
    assert [d["duplicate"] for d in documents] == [False, False, False]
    records = [e for e in entries(home) if e["event_type"] == "budget.record_call"]
    assert [r["payload"]["idempotency_key"] for r in records] == [
        "rq-first",
        "rq-0",
        "rq-1",
        "rq-2",
    ]
    assert assert_verifies(home) == len(entries(home))
    usage = _documents(server.run([raw_request(home, "usage", request_id="rq-u2")]))
    assert usage[0]["usd_used_micros"] == 1_250_000


def test_derived_state_is_kept_in_memory_and_written_at_close(home: Path, monkeypatch):
    """Between writes the file lags the chain (readers catch up from the chain), and
    what the server kept reaches the file when it stops."""
    from ledger.edges.files import keptstate

    monkeypatch.setattr(keptstate, "WRITE_EVERY_SECONDS", 3600.0)
    state = home / "state" / "derived.json"
    server = _server(home)
    assert _documents(server.run([raw_request(home, "verdict", "1", request_id="rq-0")]))
    before = state.read_bytes() if state.exists() else None
    for batch in range(3):
        requests = [
            raw_request(home, "verdict", "1", request_id=f"rq-{batch}-{i}") for i in range(4)
        ]
        assert _documents(server.run(requests))
    assert (state.read_bytes() if state.exists() else None) == before  # not written yet
    server.close()
    size = json.loads(state.read_bytes().split(b"\n")[0])["size"]
    assert size == (home / "events.jsonl").stat().st_size
    assert_verifies(home)


def test_a_state_written_by_an_in_process_writer_is_not_overwritten(home: Path, monkeypatch):
    """An in-process verdict between batches replaces the file: the server's memory of
    the older state is dropped, and its next write never goes back behind it."""
    from ledger.edges.files import keptstate

    monkeypatch.setattr(keptstate, "WRITE_EVERY_SECONDS", 3600.0)
    server = _server(home)
    assert _documents(server.run([raw_request(home, "verdict", "1", request_id="rq-a")]))
    parser = build_parser()
    assert execute(raw_request(home, "verdict", "1", request_id="rq-b"), parser).code == 0
    state = home / "state" / "derived.json"
    written = state.read_bytes()
    server.close()
    assert state.read_bytes() == written
    documents = _documents(server.run([raw_request(home, "usage", request_id="rq-c")]))
    assert documents[0]["usd_reserved"] == 2.0
