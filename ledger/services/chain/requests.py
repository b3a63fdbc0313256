"""Served requests are sealed once, whoever runs them (the resident gate and its clients).

A client whose server is late or lost runs its request again in-process with
the same request id, and the server may still run it too. So while a served
request runs, every entry it seals carries the request id in its payload
(``request_id``), the key index keeps one record per request id, and every
transaction that loads the counter under the chain lock first asks whether
the request was already sealed by another run. If so the run stops with
``AlreadyAnswered`` before it writes anything, and the caller prints the first
run's reply instead.

Entries sealed by this same run (a hook seals several, in several
transactions) are its own and do not stop it.
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# Key index records of request ids live beside idempotency keys; "/" can never
# appear in an idempotency key, so the two never collide.
_INDEX_PREFIX = "request/"


class RequestScope:
    """The served request running now, and what this run of it has sealed."""

    __slots__ = ("request_id", "sealed", "stop_when_answered")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.sealed: set[str] = set()
        # Off only for a command that finds its own first run by other means
        # (a record keyed by the request id).
        self.stop_when_answered = True

    @property
    def index_key(self) -> str:
        """The request's key in the key index."""
        return index_key(self.request_id)


class AlreadyAnsweredError(BaseException):
    """The running request was sealed by another run: stop, seal nothing.

    A ``BaseException`` on purpose: it is control flow, not an error, and must
    pass through the ``except Exception`` / ``except LedgerError`` handlers
    that turn failures into printed decisions, up to whoever runs the request.
    """

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(f"request already sealed as entry {record.get('entry_hash')}")
        self.record = record


_CURRENT: ContextVar[RequestScope | None] = ContextVar("ledger_request", default=None)


@contextmanager
def answering(request_id: str) -> Iterator[RequestScope]:
    """Run the block as served request ``request_id``.

    Raises:
        ValueError: the id is not ``^[A-Za-z0-9._:-]{1,128}$``.
    """
    if not REQUEST_ID_RE.fullmatch(request_id):
        raise ValueError(f"not a request id: {request_id!r}")
    scope = RequestScope(request_id)
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)


def current_request() -> RequestScope | None:
    """The served request running in this thread, if any."""
    return _CURRENT.get()


def index_key(request_id: str) -> str:
    """A request id's key in the key index."""
    return _INDEX_PREFIX + request_id


def request_record(
    payload: dict[str, Any], entry_hash: str, event_type: str, number: int
) -> dict[str, Any] | None:
    """The key index record of an entry sealed for a served request, or ``None``."""
    request_id = payload.get("request_id")
    if not isinstance(request_id, str) or not REQUEST_ID_RE.fullmatch(request_id):
        return None
    return {
        "key": index_key(request_id),
        "entry_hash": entry_hash,
        "event_type": event_type,
        "entry": number,
    }
