"""On a fleet's store the live feed is woken by the store's notifications, not by polling."""

import asyncio
from pathlib import Path

import pytest

from ledger.console import live
from ledger.console.auth import Principal
from ledger.runtime import Runtime
from ledger.services.gate.calls import record

NOW = "2026-06-01T12:00:00Z"


@pytest.mark.parametrize("home", ["postgres"], indirect=True)
def test_a_fleet_feed_gets_a_record_by_notification(
    home: Path, pg_store_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the fallback look put an hour away, only a notification can deliver the record."""
    monkeypatch.setattr(live, "FALLBACK_SECONDS", 3600.0)
    env = {**pg_store_env, "LEDGER_NOW": NOW}

    def runtime() -> Runtime:
        return Runtime(home, env)

    signal = live.ChainSignal(runtime)
    admin = Principal(role="admin", name="ops", key=None, csrf=None)

    async def follow() -> dict[str, str]:
        start = await live.start_of_feed(runtime)
        events = live.feed(runtime, admin, start, signal)
        first = asyncio.ensure_future(anext(events))
        # The listener connected (and woke the feed once, as after every connect),
        # and the feed has read the tail again and waits for a notification.
        while not (signal.generation >= 1 and signal._waiters):  # noqa: ASYNC110 - another thread's state
            await asyncio.sleep(0.05)
        assert signal._listener.connected.is_set()
        sealed = await asyncio.to_thread(record, runtime(), "1.25", "openai", agent="coder")
        assert sealed[0]["actual_micros"] == 1_250_000
        got = await first
        await events.aclose()  # type: ignore[attr-defined]
        signal.close()
        return got

    event = asyncio.run(follow())
    assert '"kind": "record"' in event["data"]
    assert '"agent": "coder"' in event["data"]


def test_a_file_home_has_no_listener(home: Path) -> None:
    assert Runtime(home, {"LEDGER_NOW": NOW}).chain_listener(lambda: None) is None
