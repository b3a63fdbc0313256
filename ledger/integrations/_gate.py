"""What every guarded request goes through: a verdict before, one record after.

``CallGate.admit`` runs the verdict on the request's estimate (see
``ledger.providers.estimate_request``): a halt raises ``BudgetHalted`` and the
request is never sent; ``warn-90`` emits a ``BudgetWarning`` and a log record
on the ``ledger`` logger. The admitted ``Call`` is then fed the response's
bytes as they pass and records exactly once, whichever comes first of the
response's end, its early close, or a failure, by the same settlement rule
the gateway uses (``ledger.providers.settle``):

- an answer read to its end → its usage, priced from the provider's usage
  object; without usage, or with usage that cannot be read (a chat stream
  without ``stream_options.include_usage``, a body in an encoding not read
  here) → the verdict's estimate, an upper bound: spend is never taken as $0;
- a refusal before any content (an error status, an error event) without
  usage, or a connection error before any answer → $0, which settles the
  reservation at once instead of holding budget until it expires;
- an answer cut short (closed early, broken off mid-stream) → the larger of
  the usage received and the estimate: a cut never makes a call cheaper.

Each record carries the verdict's ref and an idempotency key from the
response id (else from the verdict), so a retried record never counts twice.
"""

import logging
import warnings
import zlib
from collections.abc import Iterable
from typing import Any

from ledger.api import BudgetHalted, Ledger, Micros, VerdictKind
from ledger.errors import BudgetWarning, LedgerError, UsageObjectInvalidError
from ledger.providers import (
    Route,
    UsageReader,
    bound_web_searches,
    client_route,
    estimate_request,
    settle,
    unreadable_usage,
)

log = logging.getLogger("ledger")

# A JSON body larger than this is not kept for reading its usage (the call is
# then recorded at its estimate); the response itself is passed on whole.
MAX_JSON_BODY = 32 * 1024 * 1024
# A web search tool without max_uses is estimated at this many searches (the
# gateway's default limit, which it also writes into the request).
DEFAULT_SEARCHES = 5


class CallGate:
    """The verdict side of one guarded SDK client."""

    def __init__(
        self, book: Ledger, provider: str, *, session: str | None, agent: str | None
    ) -> None:
        self.book = book
        self.provider = provider
        self.session = session
        self.agent = agent

    def route(self, method: str, path: str) -> Route | None:
        """The model route of a request, or ``None`` for one that is not gated."""
        return client_route(self.provider, method, path)

    def admit(self, route: Route, body: bytes, headers: Iterable[tuple[str, str]] = ()) -> "Call":
        """Decide one request and reserve its estimate.

        Raises:
            RequestRefused: the request has no model or no output limit.
            BudgetHalted: the verdict halts; nothing may be sent.
            BudgetWarning: ``warn-90`` while warnings are errors; nothing may be sent.
            LedgerError: the verdict could not be run (configuration, price, chain).
        """
        estimate = estimate_request(route, body, headers=headers)
        # The SDK sends the body as it is: its searches are bounded only by the
        # request's own limits (the gateway writes a default one in).
        _body, searches = bound_web_searches(route, body, DEFAULT_SEARCHES)
        verdict = self.book.verdict_request(
            estimate, searches=searches, cycle_id=self.session, agent=self.agent
        )
        if not verdict.allowed:
            raise BudgetHalted(verdict)
        call = Call(self, route, estimate.model, verdict.verdict_ref, verdict.estimated_micros)
        # The tier the request asked for prices the record when the answer names none.
        call.service_tier = verdict.as_dict().get("service_tier")
        if verdict.kind is VerdictKind.WARN_90:
            message = (
                f"ledger: {estimate.provider}/{estimate.model} call admitted at warn-90: "
                f"{verdict.usage_pct}% of the {verdict.deciding_cap} cap would be used"
            )
            log.warning("%s (verdict %s)", message, verdict.verdict_ref)
            try:
                warnings.warn(message, BudgetWarning, stacklevel=2)
            except BudgetWarning:
                # Warnings made errors by the caller's filters: the call is not sent.
                call.finish(failure=RuntimeError("not sent"))
                raise
        return call


class Call:
    """One admitted request: reads its response as it passes and records it once."""

    def __init__(
        self, gate: CallGate, route: Route, model: str, verdict_ref: str, estimate_micros: int
    ) -> None:
        self._gate = gate
        self.model = model
        self.verdict_ref = verdict_ref
        self._estimate_micros = estimate_micros
        self.reader = UsageReader.for_route(route)
        self._status = 0
        self._sse = False
        self._body: bytearray | None = bytearray()  # a JSON body so far; None: not kept
        self._readable = True
        self._inflate: Any = None
        self.complete = False
        self.recorded = False
        self.service_tier: str | None = None

    def response_started(self, status: int, headers: Any) -> None:
        """Note the response's status and how its body is framed and encoded."""
        self._status = status
        self._sse = headers.get("content-type", "").startswith("text/event-stream")
        encoding = headers.get("content-encoding", "").strip().lower()
        if encoding in {"gzip", "deflate"}:
            # The transport sees the body as sent; usage is read from it decoded.
            self._inflate = zlib.decompressobj(wbits=47 if encoding == "gzip" else 15)
        elif encoding not in {"", "identity"}:
            self._readable = False  # an encoding not read here: the usage stays unknown

    @property
    def reads_whole_body(self) -> bool:
        """Whether the usage is in the body's end (JSON), so an early close should drain it."""
        return self._readable and not self._sse and self._body is not None and not self.complete

    def feed(self, chunk: bytes) -> None:
        """Read the next bytes of the body as sent."""
        if not self._readable:
            return
        if self._inflate is not None:
            try:
                chunk = self._inflate.decompress(chunk)
            except zlib.error:
                self._readable = False
                return
        if self._sse:
            self.reader.feed_sse(chunk)
        elif self._body is not None:
            self._body += chunk
            if len(self._body) > MAX_JSON_BODY:
                self._body = None

    def finish(self, failure: BaseException | None = None) -> None:
        """Record the call once: its usage, or its estimate, or $0 for a failure without usage.

        Raises:
            LedgerError: the record could not be sealed (raised only when no
                other failure is already on its way to the caller).
        """
        if self.recorded:
            return
        self.recorded = True
        if self._readable and not self._sse and self._body is not None and self.complete:
            self.reader.feed_json(bytes(self._body))
        try:
            self._record(failure)
        except LedgerError:
            log.exception("ledger: could not record %s (verdict %s)", self.model, self.verdict_ref)
            if failure is None:
                raise

    def _record(self, failure: BaseException | None) -> None:
        reader, book, gate = self.reader, self._gate.book, self._gate
        key = reader.idempotency_key or f"guard:{self.verdict_ref}"
        common: dict[str, Any] = {
            "provider": gate.provider, "verdict_ref": self.verdict_ref, "model": self.model,
            "cycle_id": gate.session, "idempotency_key": key,
            # The response's key may already be sealed by the gateway, at its figure.
            "same_record_only": False, "recorded_by": "sdk",
        }  # fmt: skip
        answered = self._status or None
        settlement = settle(reader.end(answered), self._estimate_micros)
        if settlement.by_usage:
            floor = Micros(settlement.floor_micros) if settlement.floor_micros else None
            try:
                recorded = book.record(
                    usage=reader.usage,
                    at_least_usd=floor,
                    service_tier=self.service_tier,
                    **common,
                )
            except UsageObjectInvalidError:
                log.warning(
                    "ledger: %s response's usage cannot be read; recorded at its estimate "
                    "(verdict %s)", self.model, self.verdict_ref, exc_info=True,
                )  # fmt: skip
                settlement = unreadable_usage(self._estimate_micros)
            else:
                warning = recorded.as_dict().get("warning")
                if warning:
                    log.warning("ledger: %s (verdict %s)", warning, self.verdict_ref)
                return
        if settlement.floor_micros and failure is None and not reader.usage:
            log.warning(
                "ledger: %s response reported no usage; recorded at its estimate (verdict %s)",
                self.model, self.verdict_ref,
            )  # fmt: skip
        book.record(Micros(settlement.floor_micros), **common)
