"""The live feed: each verdict and record as it is sealed, as Server-Sent Events.

Each open feed follows the chain's tail from where it was opened (byte
positions, so a long chain costs nothing); it reads, never locks, so a busy
console never slows a verdict. On the file store it looks at the tail a tenth
of a second at a time. On a fleet's store (PostgreSQL) it does not poll: one
listener per console (``LISTEN`` on the chain's channel, notified by every
append when its transaction commits) wakes every open feed, which then reads
the new rows; a feed also looks every ``FALLBACK_SECONDS`` in case the
listener's connection was lost. Feeds at the same position share one read of
the new lines (per tick or notification), so fifty open views parse each entry
once, not fifty times.
"""

import asyncio
import json
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from ledger.console.auth import Principal
from ledger.services.views.calls import event_of

POLL_SECONDS = 0.1
FALLBACK_SECONDS = 5.0
KEEPALIVE_SECONDS = 15.0
_READS_KEPT = 16


class ChainSignal:
    """Tells the open feeds of one console that the chain may have grown."""

    def __init__(self, make_runtime: Callable[[], Any]) -> None:
        self._make_runtime = make_runtime
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._listener: Any = None
        self._checked = False
        self.generation = 0  # bumped by each notification (from the listener's thread)
        self._reads: OrderedDict[tuple[int, int], tuple[int, int, list[dict[str, Any]]]] = (
            OrderedDict()
        )

    def _listening(self) -> bool:
        """Whether the store notifies (started on first use); ``False``: the file store."""
        with self._lock:
            if not self._checked:
                self._checked = True
                self._listener = self._make_runtime().chain_listener(self.wake)
                if self._listener is not None:
                    self._listener.start()
            return self._listener is not None

    def wake(self) -> None:
        """A row was sealed: wake every waiting feed (any thread)."""
        with self._lock:
            self.generation += 1
            waiters = list(self._waiters)
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    async def wait(self, seen: int) -> None:
        """Until the chain may hold more than it did at generation ``seen`` (or a moment)."""
        # Found out once (it may connect to the store), then read without a thread hop.
        listening = self._listener is not None
        if not self._checked:
            listening = await asyncio.to_thread(self._listening)
        if not listening:
            await asyncio.sleep(POLL_SECONDS)
            return
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._lock:
            if self.generation != seen:
                return
            self._waiters.add(waiter)
        try:
            await asyncio.wait_for(event.wait(), FALLBACK_SECONDS)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(waiter)

    def tick(self) -> int:
        """What a read of the tail is current for: a notification, or a tenth of a second."""
        if self._listener is not None:
            return self.generation
        return int(time.monotonic() / POLL_SECONDS)

    def cached(self, key: tuple[int, int]) -> tuple[int, int, list[dict[str, Any]]] | None:
        """Another feed's read from the same position in the same tick (the chain only grows)."""
        with self._lock:
            return self._reads.get(key)

    def keep(self, key: tuple[int, int], read: tuple[int, int, list[dict[str, Any]]]) -> None:
        """Share a read: the feeds at the same position parse the new lines once, not each."""
        with self._lock:
            self._reads[key] = read
            while len(self._reads) > _READS_KEPT:
                self._reads.popitem(last=False)

    def close(self) -> None:
        """Stop listening."""
        with self._lock:
            if self._listener is not None:
                self._listener.close()


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
    make_runtime: Callable[[], Any],
    principal: Principal,
    start: tuple[int, int],
    signal: ChainSignal,
) -> AsyncIterator[dict[str, str]]:
    """Events from the chain's lines after ``start`` (byte position, line count)."""
    chain = make_runtime().chain
    position, number = start
    while True:
        seen = signal.generation
        key = (position, signal.tick())
        found = signal.cached(key)
        if found is None:
            found = await asyncio.to_thread(_new_events, chain, position, number)
            signal.keep(key, found)
        position, number, events = found
        for event in events:
            if _shown(event, principal):
                yield {"data": json.dumps(event, sort_keys=True)}
        await signal.wait(seen)


def _end_of_chain(runtime: Any) -> tuple[int, int]:
    """The chain's end (byte position, entries), from the rollups caught up to it."""
    from ledger.services.views.rollups import catch_up

    caught = catch_up(runtime)
    return caught.size, caught.entries


async def start_of_feed(make_runtime: Callable[[], Any]) -> tuple[int, int]:
    """Where a new feed starts: the end of the chain as the rollups last folded it."""
    return await asyncio.to_thread(_end_of_chain, make_runtime())
