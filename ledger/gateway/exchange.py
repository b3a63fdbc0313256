"""One admitted call: the verdict before it, the record after it, exactly once.

The record goes through the same service as ``ledger record`` (priced from the
provider's usage object), with the verdict's ref and an idempotency key from
the provider's response id. A response that ends with usage is recorded at it;
one that ends without (an error status, an error event or a cut before any
usage, an unreachable upstream) settles its reservation at $0; a complete
answer whose usage cannot be read is recorded at its reserved estimate, so an
unreadable usage never counts as free.
"""

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx

from ledger.errors import UsageError
from ledger.gateway.committer import Committer
from ledger.runtime import Runtime
from ledger.services.gate import calls


def _usd(micros: int) -> str:
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def _zero_or_estimate(estimated_micros: int, *, complete: bool) -> calls.Micros:
    return calls.Micros(estimated_micros if complete else 0)


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

    @property
    def verdict_ref(self) -> str:
        """The ref of the verdict that admitted this call."""
        return str(self.verdict["verdict_ref"])

    def _idempotency_key(self) -> str:
        # The key every part of the product records a response under, so a
        # response recorded by an SDK guard behind the gateway counts once.
        key = getattr(self.reader, "idempotency_key", None)
        return key if isinstance(key, str) else f"gw:{self.verdict_ref}"

    async def record(self, *, complete: bool) -> bool:
        """Record the call once (later calls return the first outcome); whether it is durable.

        Args:
            complete: the response ended as the provider ends a successful one;
                without usage it is then recorded at its estimate, else at $0.
        """
        if self._recorded is not None:
            return self._recorded
        self._recorded = False
        usage = getattr(self.reader, "usage", None) or None
        model = getattr(self.reader, "model", None) or self.model
        key = self._idempotency_key()
        ref, provider, cycle, scope = self.verdict_ref, self.provider, self.cycle_id, self.scope
        fallback = _zero_or_estimate(int(self.verdict["estimated_micros"]), complete=complete)

        def by_usage(runtime: Runtime) -> dict[str, Any]:
            document, _warning = calls.record(
                runtime, None, provider, verdict_ref=ref, model=model, cycle_id=cycle,
                idempotency_key_value=key, usage_object=usage, **scope,
            )  # fmt: skip
            return document

        def by_amount(runtime: Runtime) -> dict[str, Any]:
            document, _warning = calls.record(
                runtime, fallback, provider, verdict_ref=ref, model=model, cycle_id=cycle,
                idempotency_key_value=f"gw:{ref}", **scope,
            )  # fmt: skip
            return document

        # Shielded: a client that goes away must not cancel the accounting of
        # what the upstream already produced.
        with anyio.CancelScope(shield=True):
            try:
                if usage:
                    try:
                        await self._committer.run(by_usage)
                    except UsageError as exc:
                        shown = _usd(fallback)
                        self._log(f"usage of {key} unreadable ({exc}); recorded at ${shown}")
                        await self._committer.run(by_amount)
                else:
                    await self._committer.run(by_amount)
            except Exception as exc:  # noqa: BLE001 - any failure: the end is withheld
                self._log(f"could not record {key} (verdict {ref[:12]}): {exc}")
                return False
        self._recorded = True
        return True

    async def relay_stream(self, response: httpx.Response) -> AsyncIterator[bytes]:
        """The upstream's SSE bytes as they come, the end held back until the record is durable.

        Once the provider's terminal event has been read, nothing more goes out
        until the call is recorded; a call that cannot be recorded never shows
        the client its end (the stream stops short, as a cut one does).
        """
        held: list[bytes] = []
        ended = False
        try:
            async for chunk in _body_chunks(response):
                self.reader.feed_sse(chunk)
                if held or self.reader.finished:
                    held.append(chunk)
                else:
                    yield chunk
            ended = True
        except httpx.HTTPError as exc:
            self._log(f"upstream stream of {self.verdict_ref[:12]} broke: {exc}")
        finally:
            # Shielded: a client that went away still gets what it used recorded.
            with anyio.CancelScope(shield=True):
                await response.aclose()
                complete = ended and bool(self.reader.finished) and not self.reader.error
                durable = await self.record(complete=complete)
        if durable and held:
            yield b"".join(held)


def _body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as the upstream sent it; decoded only if it came compressed after all."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    return response.aiter_raw() if encoding in {"", "identity"} else response.aiter_bytes()
