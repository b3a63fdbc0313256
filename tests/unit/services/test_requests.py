"""Served requests sealed once (``ledger.services.chain.requests`` with the writer and the counter)."""

import json
from pathlib import Path

import pytest

from ledger.runtime import Runtime
from ledger.services.chain.requests import AlreadyAnsweredError, answering, current_request
from ledger.services.chain.state import load_counter
from ledger.services.chain.writer import Writer

NOW = {"LEDGER_NOW": "2026-11-22T08:00:00Z"}
PAYLOAD = {
    "provider": "openai",
    "actual_micros": 5,
    "utc_day": "2026-11-22",
    "verdict_ref": None,
    "settled": False,
    "cycle_id": "c-1",
}


def _seal(runtime: Runtime) -> str:
    """One transaction as a served command makes it: load the counter, then append."""
    with runtime.chain.transaction() as tx:
        load_counter(tx, runtime)
        return Writer(runtime).append(tx, "budget.record_call", PAYLOAD).entry_hash


def _request_ids(home: Path) -> list[str | None]:
    lines = (home / "events.jsonl").read_text().splitlines()
    return [json.loads(line)["payload"].get("request_id") for line in lines]


class TestServedRequests:
    def test_entries_sealed_for_a_request_carry_its_id(self, home: Path):
        """Inside a request every sealed payload holds request_id; outside, none does."""
        runtime = Runtime(home, NOW)
        _seal(runtime)
        with answering("rq-1"):
            _seal(runtime)
        assert _request_ids(home) == [None, "rq-1"]
        assert current_request() is None

    def test_a_second_run_of_a_sealed_request_stops_before_writing(self, home: Path):
        """Another run with the same id stops at its first counter load, under the lock."""
        runtime = Runtime(home, NOW)
        with answering("rq-1"):
            first = _seal(runtime)
        with answering("rq-1"), pytest.raises(AlreadyAnsweredError) as stopped:
            _seal(runtime)
        assert stopped.value.record["entry_hash"] == first
        assert _request_ids(home) == ["rq-1"]

    def test_a_run_that_seals_several_entries_is_not_stopped_by_its_own(self, home: Path):
        """A hook seals in several transactions: its own entries never stop it."""
        runtime = Runtime(home, NOW)
        with answering("rq-hook"):
            _seal(runtime)
            _seal(runtime)
        assert _request_ids(home) == ["rq-hook", "rq-hook"]

    def test_the_request_is_found_from_the_chain_when_the_index_is_gone(self, home: Path):
        """The index is derived: without it (and the state), folding the chain finds the id."""
        runtime = Runtime(home, NOW)
        with answering("rq-1"):
            _seal(runtime)
        runtime.states.delete()
        assert not (home / "state" / "index").exists()
        with answering("rq-1"), pytest.raises(AlreadyAnsweredError):
            _seal(Runtime(home, NOW))

    def test_a_request_id_of_the_wrong_shape_is_refused(self):
        """Ids are file-name and index safe: ^[A-Za-z0-9._:-]{1,128}$."""
        with pytest.raises(ValueError, match="not a request id"), answering("rq/1"):
            pass
