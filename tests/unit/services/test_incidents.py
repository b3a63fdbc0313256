"""Incidents the daemon's health check opens: told once when they begin, once when they clear."""

import datetime as dt
from collections.abc import Iterator
from typing import Any

from ledger.core.config import from_mapping
from ledger.core.incidents import Condition
from ledger.services.billing.alerts import run_alerts

URL = "http://127.0.0.1:9/hook"


class NoChain:
    """A chain with nothing sealed yet: the follower has nothing to read."""

    def exists(self) -> bool:
        return False

    def iter_lines(self, _start: int = 0, _end: int | None = None) -> Iterator[bytes]:
        return iter(())


class Memory:
    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    def load(self) -> dict[str, Any]:
        return self.state

    def save(self, state: dict[str, Any]) -> None:
        self.state = state


def _checks(seen: list[list[Condition] | None], on: list[str] | None = None) -> list[str]:
    """Run one check per item of ``seen``; the events of the bodies posted, in order."""
    rule: dict[str, Any] = {"url": URL} if on is None else {"url": URL, "on": on}
    config = from_mapping({"alerts": [rule]}, {})
    store = Memory()
    posted: list[str] = []

    def post_all(
        items: list[tuple[str, dict[str, Any]]], _timeout: float
    ) -> list[Exception | None]:
        posted.extend(f"{body['event']} {body['scope']}" for _url, body in items)
        return [None] * len(items)

    start = dt.datetime(2026, 3, 2, 10, tzinfo=dt.UTC)
    for number, conditions in enumerate(seen):
        now = start + dt.timedelta(seconds=10 * number)

        def standing(found: list[Condition] | None = conditions) -> list[Condition] | None:
            return found

        run_alerts(
            NoChain(), config, store, now, post_all, lambda _line: None,  # type: ignore[arg-type]
            standing,
        )  # fmt: skip
    return posted


DOWN = Condition("unavailable", "store", "cannot reach the database")
TORN = Condition("broken", "chain", "ends in a torn line")


def test_an_incident_seen_by_many_checks_is_told_once_and_its_end_once():
    assert _checks([[], [DOWN], [DOWN], [DOWN], [], []]) == [
        "unavailable store",
        "recovered store",
    ]


def test_a_check_that_cannot_tell_leaves_the_incident_open():
    assert _checks([[TORN], None, None, [TORN], []]) == ["broken chain", "recovered chain"]


def test_a_second_incident_of_the_same_kind_is_told_again():
    assert _checks([[TORN], [], [TORN], []]) == [
        "broken chain",
        "recovered chain",
        "broken chain",
        "recovered chain",
    ]


def test_a_recovery_goes_where_its_incident_went():
    assert _checks([[DOWN, TORN], [TORN], []], on=["broken"]) == [
        "broken chain",
        "recovered chain",
    ]
