"""The guard as an httpx transport around the SDK client's own (sync and async).

The official SDKs send every request through one ``httpx2`` client, so a
transport wrapped around that client's own transport sees every request
whatever SDK method sent it (``create``, ``stream``, ``parse``,
``with_raw_response``, ``beta.*``), and every client derived from it
(``copy()``, ``with_options()``) shares it. Requests to endpoints that are not
model calls pass through untouched.

A refusal, a halt (or a ``warn-90`` warning made an error by the caller's
warning filters) raised here is made an instance of the SDK's own base error
as well (``anthropic.AnthropicError``, ``openai.OpenAIError``): the SDKs pass
their own errors through unchanged, where any other exception from a transport
would be retried and reported as a connection error.
"""

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2 as httpx

from ledger.errors import BudgetWarning, LedgerError
from ledger.integrations._gate import Call, CallGate

_ADOPTED: dict[tuple[type, type], type] = {}


def adopt(error: Exception, sdk_error: type[Exception]) -> Exception:
    """``error``, made also an instance of ``sdk_error`` (its class and message unchanged)."""
    cls = type(error)
    mixed = _ADOPTED.get((cls, sdk_error))
    if mixed is None:
        mixed = type(cls.__name__, (cls, sdk_error), {"__module__": cls.__module__})
        _ADOPTED[(cls, sdk_error)] = mixed
    error.__class__ = mixed
    return error


class _GuardedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, call: Call) -> None:
        self._inner = inner
        self._call = call

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._inner)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                self._call.complete = True
                self._call.finish()
                return
            except Exception as exc:
                self._call.finish(failure=exc)
                raise
            self._call.feed(chunk)
            yield chunk

    def close(self) -> None:
        failure: BaseException | None = None
        try:
            if self._call.reads_whole_body and not self._call.recorded:
                for chunk in self._inner:  # the usage is at the end of a JSON body
                    self._call.feed(chunk)
                self._call.complete = True
        except Exception as exc:  # noqa: BLE001 - a failed drain leaves the usage unknown
            failure = exc
        finally:
            self._inner.close()
            self._call.finish(failure=failure)


class GuardTransport(httpx.BaseTransport):
    """Gates model requests, then passes them to the client's own transport."""

    def __init__(
        self, inner: httpx.BaseTransport, gate: CallGate, sdk_error: type[Exception]
    ) -> None:
        self._inner = inner
        self._gate = gate
        self._sdk_error = sdk_error

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Verdict, send, and hand back a response whose body records when it ends."""
        route = self._gate.route(request.method, request.url.path)
        if route is None:
            return self._inner.handle_request(request)
        try:
            call = self._gate.admit(route, request.read(), list(request.headers.items()))
        except (LedgerError, BudgetWarning) as exc:
            raise adopt(exc, self._sdk_error) from None
        try:
            response = self._inner.handle_request(request)
        except Exception as exc:
            call.finish(failure=exc)
            raise
        call.response_started(response.status_code, response.headers)
        assert isinstance(response.stream, httpx.SyncByteStream)  # noqa: S101 - httpx's contract
        response.stream = _GuardedStream(response.stream, call)
        return response

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()


class _AsyncGuardedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, call: Call) -> None:
        self._inner = inner
        self._call = call

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        while True:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                self._call.complete = True
                await _in_thread(self._call.finish)
                return
            except Exception as exc:
                await _in_thread(self._call.finish, exc)
                raise
            self._call.feed(chunk)
            yield chunk

    async def aclose(self) -> None:
        failure: BaseException | None = None
        try:
            if self._call.reads_whole_body and not self._call.recorded:
                async for chunk in self._inner:
                    self._call.feed(chunk)
                self._call.complete = True
        except Exception as exc:  # noqa: BLE001 - a failed drain leaves the usage unknown
            failure = exc
        finally:
            await self._inner.aclose()
            await _in_thread(self._call.finish, failure)


async def _in_thread(function: Any, *args: Any) -> Any:
    """Run a chain write off the event loop (it takes a lock and waits for the disk)."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)


class AsyncGuardTransport(httpx.AsyncBaseTransport):
    """The async client's guard: the same gate, the chain written off the event loop."""

    def __init__(
        self, inner: httpx.AsyncBaseTransport, gate: CallGate, sdk_error: type[Exception]
    ) -> None:
        self._inner = inner
        self._gate = gate
        self._sdk_error = sdk_error

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Verdict, send, and hand back a response whose body records when it ends."""
        route = self._gate.route(request.method, request.url.path)
        if route is None:
            return await self._inner.handle_async_request(request)
        body = await request.aread()
        try:
            call: Call = await _in_thread(self._gate.admit, route, body)
        except (LedgerError, BudgetWarning) as exc:
            raise adopt(exc, self._sdk_error) from None
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            await _in_thread(call.finish, exc)
            raise
        call.response_started(response.status_code, response.headers)
        assert isinstance(response.stream, httpx.AsyncByteStream)  # noqa: S101 - httpx's contract
        response.stream = _AsyncGuardedStream(response.stream, call)
        return response

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self._inner.aclose()


def guarded_client(client: Any, gate: CallGate, sdk_error: type[Exception]) -> Any:
    """A copy of the SDK ``client`` whose HTTP client sends through a guard transport.

    The copy keeps the client's own transport (connection pool, TLS and proxy
    settings) and its per-URL transports (proxy mounts), each wrapped.

    Raises:
        TypeError: the client is not an SDK client this guard knows how to wrap.
    """
    http = getattr(client, "_client", None)  # the SDK's httpx client (its own attribute)
    inner = getattr(http, "_transport", None)
    mounts = getattr(http, "_mounts", None)
    if isinstance(http, httpx.AsyncClient) and isinstance(inner, httpx.AsyncBaseTransport):
        transport_type: Any = AsyncGuardTransport
        client_type: Any = httpx.AsyncClient
    elif isinstance(http, httpx.Client) and isinstance(inner, httpx.BaseTransport):
        transport_type, client_type = GuardTransport, httpx.Client
    else:
        raise TypeError(
            "ledger: guard_client needs an official SDK client built on httpx2 "
            f"(got {type(client).__name__})"
        )
    wrapped_mounts = {
        pattern.pattern: None if mounted is None else transport_type(mounted, gate, sdk_error)
        for pattern, mounted in (mounts or {}).items()
    }
    guarded_http = client_type(
        transport=transport_type(inner, gate, sdk_error), mounts=wrapped_mounts,
        timeout=http.timeout, follow_redirects=http.follow_redirects,
        max_redirects=http.max_redirects, headers=http.headers, cookies=http.cookies,
        event_hooks=http.event_hooks, trust_env=http.trust_env,
    )  # fmt: skip
    guarded = client.copy(http_client=guarded_http)
    guarded._ledger_wrapped_http = http  # noqa: SLF001 - the original must outlive the copy
    return guarded
