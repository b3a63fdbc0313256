"""What the SDK guards share: the estimate, the verdict before, the record after.

For plain responses and for streams, sync and async.

A request's input estimate is the UTF-8 size of its messages ÷ 3, rounded up
(a token is rarely under 3 bytes of text, so this over-counts rather than
under-counts); its output estimate is the request's own output limit, without
which it is refused before anything is sent. A halt raises ``BudgetHalted``
and sends nothing. A response's usage is recorded with the idempotency key of
its verdict; a stream is recorded when it ends or is closed, with the usage it
delivered so far, or, when it delivered none, at its reserved estimate.
"""

import inspect
import json
from collections.abc import Callable
from decimal import Decimal
from types import TracebackType
from typing import Any, Self

from ledger.api import Guard, Ledger, usage_mapping

OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def input_estimate(value: Any) -> int:
    """UTF-8 bytes of the request's messages ÷ 3, rounded up."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return -(-len(text.encode("utf-8")) // 3)


def output_limit(kwargs: dict[str, Any]) -> int:
    """The request's output limit.

    Raises:
        ValueError: the request has none (an unbounded call cannot be reserved).
    """
    for name in OUTPUT_LIMITS:
        value = kwargs.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    raise ValueError(
        "ledger: the request has no output limit (max_tokens, max_completion_tokens or "
        "max_output_tokens); it was not sent"
    )


class Accumulator:
    """The usage a stream has delivered so far, as a plain mapping."""

    def __init__(self, absorb: Callable[[dict[str, Any], Any], None]) -> None:
        self.usage: dict[str, Any] = {}
        self._absorb = absorb

    def feed(self, event: Any) -> None:
        """Take the usage an event carries, if any."""
        self._absorb(self.usage, event)


def merge(target: dict[str, Any], usage: Any) -> None:
    """Overlay the non-null fields of a usage object on ``target``."""
    data = usage_mapping(usage)
    if isinstance(data, dict):
        target.update({key: value for key, value in data.items() if value is not None})


def _estimate_usd(call: Guard) -> str:
    assert call.verdict is not None  # noqa: S101 - an entered guard has its verdict
    return str(Decimal(int(call.verdict.estimated_micros)) / Decimal(1_000_000))


def finish(call: Guard, usage: dict[str, Any]) -> None:
    """Record a stream once: its usage, or (none delivered) its reserved estimate."""
    if call.recorded is not None:
        return
    if usage:
        call.record(usage=usage)
    else:
        call.record(_estimate_usd(call))


class GuardedStream:
    """A provider stream that records its usage when it ends or is closed (sync)."""

    def __init__(self, stream: Any, call: Guard, accumulator: Accumulator) -> None:
        self._stream = stream
        self._call = call
        self._acc = accumulator
        self._iterator: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __iter__(self) -> "GuardedStream":
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            self._iterator = iter(self._stream)
        try:
            event = next(self._iterator)
        except StopIteration:
            finish(self._call, self._acc.usage)
            raise
        self._acc.feed(event)
        return event

    def close(self) -> None:
        """Close the stream and record what it delivered."""
        try:
            self._stream.close()
        finally:
            finish(self._call, self._acc.usage)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncGuardedStream:
    """A provider stream that records its usage when it ends or is closed (async)."""

    def __init__(self, stream: Any, call: Guard, accumulator: Accumulator) -> None:
        self._stream = stream
        self._call = call
        self._acc = accumulator
        self._iterator: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __aiter__(self) -> "AsyncGuardedStream":
        return self

    async def __anext__(self) -> Any:
        if self._iterator is None:
            self._iterator = self._stream.__aiter__()
        try:
            event = await self._iterator.__anext__()
        except StopAsyncIteration:
            finish(self._call, self._acc.usage)
            raise
        self._acc.feed(event)
        return event

    async def close(self) -> None:
        """Close the stream and record what it delivered."""
        try:
            await self._stream.close()
        finally:
            finish(self._call, self._acc.usage)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class Endpoint:
    """One SDK method (``create``) guarded: verdict before, record after."""

    def __init__(
        self,
        create: Callable[..., Any],
        book: Ledger,
        provider: str,
        messages_key: str,
        absorb: Callable[[dict[str, Any], Any], None],
    ) -> None:
        self._create = create
        self._book = book
        self._provider = provider
        self._messages_key = messages_key
        self._absorb = absorb

    def _enter(self, kwargs: dict[str, Any]) -> Guard:
        limit = output_limit(kwargs)
        call = self._book.guard(
            provider=self._provider, model=kwargs.get("model"),
            input_tokens=input_estimate(kwargs.get(self._messages_key)), max_output_tokens=limit,
        )  # fmt: skip
        return call.__enter__()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call = self._enter(kwargs)
        result = self._create(*args, **kwargs)
        if inspect.isawaitable(result):  # an async client: the request runs when awaited
            return self._finish_async(result, call, bool(kwargs.get("stream")))
        if kwargs.get("stream"):
            return GuardedStream(result, call, Accumulator(self._absorb))
        call.record(usage=result.usage)
        return result

    async def _finish_async(self, pending: Any, call: Guard, stream: bool) -> Any:
        result = await pending
        if stream:
            return AsyncGuardedStream(result, call, Accumulator(self._absorb))
        call.record(usage=result.usage)
        return result


class Proxy:
    """An SDK object with some attributes replaced; everything else is the original."""

    def __init__(self, target: Any, replaced: dict[str, Any]) -> None:
        self._target = target
        self._replaced = replaced

    def __getattr__(self, name: str) -> Any:
        replaced = self.__dict__["_replaced"]
        if name in replaced:
            return replaced[name]
        return getattr(self.__dict__["_target"], name)
