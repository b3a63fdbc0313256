"""The live feed: each verdict and record as it is sealed, as Server-Sent Events.

Each open feed follows the chain's tail from where it was opened (byte
positions, so a long chain costs nothing), a tenth of a second at a time; it
reads, never locks, so a busy console never slows a verdict.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from ledger.console.auth import Principal
from ledger.services.views.calls import event_of

POLL_SECONDS = 0.1
KEEPALIVE_SECONDS = 15.0


def _new_events(chain: Any, position: int, number: int) -> tuple[int, int, list[dict[str, Any]]]:
    events = []
    for line in chain.iter_lines(position):
        if not line.endswith(b"\n"):
            break
        position += len(line)
        number += 1
        event = event_of(number, line)
        if event is not None:
            events.append(event)
    return position, number, events


def _shown(event: dict[str, Any], principal: Principal) -> bool:
    return principal.role != "key" or event.get("key") == principal.name


async def feed(
    make_runtime: Callable[[], Any], principal: Principal, start: tuple[int, int]
) -> AsyncIterator[dict[str, str]]:
    """Events from the chain's lines after ``start`` (byte position, line count)."""
    chain = make_runtime().chain
    position, number = start
    while True:
        position, number, events = await asyncio.to_thread(_new_events, chain, position, number)
        for event in events:
            if _shown(event, principal):
                yield {"data": json.dumps(event, sort_keys=True)}
        await asyncio.sleep(POLL_SECONDS)


def _end_of_chain(runtime: Any) -> tuple[int, int]:
    """The chain's end (byte position, entries), from the rollups caught up to it."""
    from ledger.services.views.rollups import catch_up

    caught = catch_up(runtime)
    return caught.size, caught.entries


async def start_of_feed(make_runtime: Callable[[], Any]) -> tuple[int, int]:
    """Where a new feed starts: the end of the chain as the rollups last folded it."""
    return await asyncio.to_thread(_end_of_chain, make_runtime())
