"""One admitted call: the verdict before it, the record after it, exactly once.

The record goes through the same service as ``ledger record`` (priced from the
provider's usage object), with the verdict's ref and an idempotency key from
the provider's response id. What it records is decided by the one settlement
rule every path shares (``ledger.core.settlement``): the usage of an answer
read to its end, else the estimate; $0 only for an upstream that refused
before any content or could not be reached; and for an answer cut short or
not fully readable, never less than the estimate.

A stream is read from the upstream by its own task, not by the client's: a
client that goes away does not stop the reading, which goes on for at most
``proxy.drain_seconds`` so the call's final usage is recorded. Streams are
SSE, or (Gemini's ``streamGenerateContent`` without ``alt=sse``) one JSON
array passed on chunk by chunk, its closing bracket held until the record.
A Chat Completions stream whose usage chunk the gateway asked for (the
client did not) has that chunk kept from the client.
"""

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from ledger.errors import UsageError
from ledger.gateway.committer import Committer
from ledger.providers import Settlement, settle, unreadable_usage
from ledger.runtime import Runtime
from ledger.services.gate import calls
from ledger.services.gate.call_args import Micros

# Chunks read ahead of a slow client; the upstream waits beyond that.
_READ_AHEAD = 16
# The blank line that ends an SSE event (LF or CRLF line ends; a stream with CR
# alone is split less finely, which only holds back more).
_EVENT_END = re.compile(rb"\n\r?\n")


def _usd(micros: int) -> str:
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


class Exchange:
    """An admitted request and its response, recorded once whatever way it ends."""

    def __init__(
        self,
        committer: Committer,
        provider: str,
        model: str,
        verdict: dict[str, Any],
        cycle_id: str | None,
        reader: Any,
        log: Callable[[str], None],
    ) -> None:
        self._committer = committer
        self.provider = provider
        self.model = model
        self.verdict = verdict
        self.cycle_id = cycle_id
        self.reader = reader
        self._log = log
        self._recorded: bool | None = None  # None: not yet; then whether it is durable
        # The caller's agent, tags and gateway key, sealed with the record too: a
        # response that outlives its reservation still counts on the caller's budgets.
        self.scope: dict[str, Any] = {}
        # The body is a JSON array of responses (Gemini without alt=sse), not SSE.
        self.json_array = False
        # The gateway added stream_options.include_usage: the usage chunk is its own.
        self.hide_usage_chunk = False
        self._partial = b""

    @property
    def verdict_ref(self) -> str:
        """The ref of the verdict that admitted this call."""
        return str(self.verdict["verdict_ref"])

    def _idempotency_key(self) -> str:
        # The key every part of the product records a response under, so a
        # response recorded by an SDK guard behind the gateway counts once.
        key = getattr(self.reader, "idempotency_key", None)
        return key if isinstance(key, str) else f"gw:{self.verdict_ref}"

    async def record(self, status: int | None) -> bool:
        """Record the call once (later calls return the first outcome); whether it is durable.

        Args:
            status: the upstream's HTTP status, ``None`` when it could not be reached.
        """
        if self._recorded is not None:
            return self._recorded
        self._recorded = False
        usage = self.reader.usage
        model = getattr(self.reader, "model", None) or self.model
        key = self._idempotency_key()
        estimate = int(self.verdict["estimated_micros"])
        settlement = settle(self.reader.end(status), estimate)
        ref, provider, cycle, scope = self.verdict_ref, self.provider, self.cycle_id, self.scope
        tier = self.verdict.get("service_tier")

        def by_usage(runtime: Runtime) -> dict[str, Any]:
            document, warning = calls.record(
                runtime, None, provider, verdict_ref=ref, model=model, cycle_id=cycle,
                idempotency_key_value=key, usage_object=usage,
                floor_micros=settlement.floor_micros, recorded_by="gateway",
                service_tier=tier if isinstance(tier, str) else None, **scope,
            )  # fmt: skip
            if warning:
                self._log(f"record of {key}: {warning}")
            return document

        def by_amount(chosen: Settlement) -> Callable[[Runtime], dict[str, Any]]:
            def job(runtime: Runtime) -> dict[str, Any]:
                document, _warning = calls.record(
                    runtime, Micros(chosen.floor_micros), provider, verdict_ref=ref, model=model,
                    cycle_id=cycle, idempotency_key_value=f"gw:{ref}",
                    usage_object=usage if chosen.by_usage else None, **scope,
                )  # fmt: skip
                return document

            return job

        # Shielded: a client that goes away must not cancel the accounting of
        # what the upstream already produced.
        with anyio.CancelScope(shield=True):
            try:
                if settlement.by_usage and usage:
                    try:
                        await self._committer.run(by_usage)
                    except UsageError as exc:
                        fallback = unreadable_usage(estimate)
                        self._log(
                            f"usage of {key} unreadable ({exc}); "
                            f"recorded at ${_usd(fallback.floor_micros)}"
                        )
                        await self._committer.run(by_amount(fallback))
                else:
                    await self._committer.run(by_amount(settlement))
            except Exception as exc:  # noqa: BLE001 - any failure: the end is withheld
                self._log(f"could not record {key} (verdict {ref[:12]}): {exc}")
                return False
        self._recorded = True
        return True

    async def relay_stream(
        self, response: httpx.Response, pumps: TaskGroup, drain_seconds: float
    ) -> AsyncIterator[bytes]:
        """The upstream's SSE bytes as they come, the end held back until the record is durable.

        The upstream is read by a task of ``pumps``; this generator only hands
        its chunks to the client. A client that goes away before the end
        leaves the reading ``drain_seconds`` more to reach the final usage.
        """
        send, receive = anyio.create_memory_object_stream[bytes](_READ_AHEAD)
        reading = anyio.CancelScope()
        done = anyio.Event()
        pumps.start_soon(self._pump, response, send, reading, done)
        try:
            async with receive:
                async for chunk in receive:
                    yield chunk
        finally:
            if not done.is_set():
                reading.deadline = min(reading.deadline, anyio.current_time() + drain_seconds)
                self._log(
                    f"client of {self.verdict_ref[:12]} went away before the end; "
                    f"reading on for at most {drain_seconds:g} s for its usage"
                )

    def _split_at_terminal(self, chunk: bytes) -> tuple[bytes, bytes]:
        """Feed ``chunk`` to the reader: the bytes before the terminal event, and the rest.

        The chunk is fed event by event, so an upstream that sends a whole
        stream in one chunk still has every event before its last passed on at
        once; only the terminal event (from the end of the event before it)
        waits for the record. A chunk without the terminal event is all ahead.
        """
        if self.json_array:
            was_closed = self.reader.array_closed
            self.reader.feed_array(chunk)
            if self.reader.array_closed and not was_closed:
                bracket = chunk.rfind(b"]")
                return chunk[:bracket], chunk[bracket:]
            return chunk, b""
        start = 0
        for end in _event_ends(chunk):
            self.reader.feed_sse(chunk[start:end])
            if self.reader.finished:
                self.reader.feed_sse(chunk[end:])
                return chunk[:start], chunk[start:]
            start = end
        return chunk, b""

    async def _pump(
        self,
        response: httpx.Response,
        send: MemoryObjectSendStream[bytes],
        reading: anyio.CancelScope,
        done: anyio.Event,
    ) -> None:
        """Read the upstream to its end (or the drain's), record, then release the end.

        Once the provider's terminal event has been read, nothing more goes out
        until the call is recorded; a call that cannot be recorded never shows
        the client its end (the stream stops short, as a cut one does).
        """
        held: list[bytes] = []
        listening = True
        try:
            with reading:
                async for chunk in _body_chunks(response):
                    if held:
                        self._feed(chunk)  # usage may still follow the end
                        held.append(chunk)
                        if not listening:
                            break
                        continue
                    ahead, terminal = self._split_at_terminal(chunk)
                    if self.hide_usage_chunk:
                        ahead = self._without_usage_chunk(ahead)
                    if ahead and listening:
                        try:
                            await send.send(ahead)
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                            listening = False
                    if terminal:
                        held.append(terminal)
                        if not listening:
                            break
        except httpx.HTTPError as exc:
            self._log(f"upstream stream of {self.verdict_ref[:12]} broke: {exc}")
        except Exception as exc:  # noqa: BLE001 - a bug must still leave the call recorded
            self._log(f"upstream stream of {self.verdict_ref[:12]} failed: {exc!r}")
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
                durable = await self.record(response.status_code)
                if durable and held and listening:
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await send.send(b"".join(held))
                done.set()
                send.close()

    def _feed(self, chunk: bytes) -> None:
        if self.json_array:
            self.reader.feed_array(chunk)
        else:
            self.reader.feed_sse(chunk)

    def _without_usage_chunk(self, data: bytes) -> bytes:
        """``data``'s whole events but the usage chunk; a partial event waits for its rest."""
        data = self._partial + data
        ends = [match.end() for match in _EVENT_END.finditer(data)]
        whole = ends[-1] if ends else 0
        self._partial = data[whole:]
        kept = []
        start = 0
        for end in ends:
            if not _is_usage_chunk(data[start:end]):
                kept.append(data[start:end])
            start = end
        return b"".join(kept)


def _is_usage_chunk(event: bytes) -> bool:
    """Whether an SSE event is Chat Completions' usage chunk (no choices, a usage)."""
    for line in event.splitlines():
        if line.startswith(b"data:"):
            try:
                data = json.loads(line[5:])
            except ValueError:
                return False
            return isinstance(data, dict) and data.get("choices") == [] and bool(data.get("usage"))
    return False


def _event_ends(chunk: bytes) -> list[int]:
    """The offsets just past each event's end (a blank line) in ``chunk``, then its length."""
    ends = [match.end() for match in _EVENT_END.finditer(chunk)]
    if not ends or ends[-1] != len(chunk):
        ends.append(len(chunk))
    return ends


def _body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as the upstream sent it; decoded only if it came compressed after all."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    return response.aiter_raw() if encoding in {"", "identity"} else response.aiter_bytes()
