"""POST alerts as JSON to webhooks (Slack, Teams or any HTTP endpoint).

Every POST has one deadline for the whole request (connecting, sending, the
answer's headers and body): an endpoint that answers one byte every few seconds
is cut at the deadline, not held open by each byte resetting a read timeout.
The posts of one round run side by side, so a slow webhook never holds back
another. A status outside 2xx, a connection error or the deadline is a failure
the caller retries later.

A webhook URL may carry a secret (a Slack-style secret path, a query token,
``user:password@``): logs show it through ``ledger.core.alerts.redacted_url``
only, failures here never quote it, and a URL with credentials is sent with
HTTP Basic auth, never with them in the URL.
"""

import base64
import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

DEFAULT_TIMEOUT_SECONDS = 10.0
_MAX_ANSWER_BYTES = 64 * 1024


class WebhookError(Exception):
    """The webhook did not take the alert (a non-2xx status, no connection, the deadline)."""


def _without_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL to send to, and the Basic auth pair its ``user:password@`` gave."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    netloc = parts.netloc.rsplit("@", 1)[1]
    auth = (
        urllib.parse.unquote(parts.username or ""),
        urllib.parse.unquote(parts.password or ""),
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), auth


def _connection(target: str, deadline_seconds: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urllib.parse.urlsplit(target)
    path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return kind(parts.netloc, timeout=deadline_seconds), path


def _post_one(url: str, body: dict[str, Any], deadline_seconds: float) -> None:
    """One POST that ends by ``deadline_seconds``: a timer shuts the socket at the deadline.

    A socket timeout alone bounds each read, not the request: an endpoint that
    sends a byte just inside it holds the request open for ever.
    """
    target, auth = _without_credentials(url)
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    expired = threading.Event()
    try:
        connection, path = _connection(target, deadline_seconds)
    except (ValueError, http.client.HTTPException) as exc:
        raise WebhookError(f"{type(exc).__name__}: not a usable URL") from exc

    def cut() -> None:
        expired.set()
        if connection.sock is not None:
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline_seconds, cut)
    timer.start()
    try:
        connection.request("POST", path, body=data, headers=headers)
        response = connection.getresponse()
        response.read(_MAX_ANSWER_BYTES)
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise WebhookError(f"no answer within {deadline_seconds:g} s") from exc
        # Messages from the HTTP client may quote the URL; name the kind of failure only.
        raise WebhookError(f"{type(exc).__name__}: cannot reach the webhook") from exc
    finally:
        timer.cancel()
        connection.close()
    if expired.is_set():
        raise WebhookError(f"no answer within {deadline_seconds:g} s")
    if not 200 <= status < 300:  # noqa: PLR2004 - HTTP's success range
        raise WebhookError(f"HTTP {status}")


def _outcome(url: str, body: dict[str, Any], deadline_seconds: float) -> Exception | None:
    try:
        _post_one(url, body, deadline_seconds)
    except WebhookError as exc:
        return exc
    return None


def post_all(
    items: Sequence[tuple[str, dict[str, Any]]], timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> list[Exception | None]:
    """POST each ``(url, body)`` side by side; for each, ``None`` or the failure.

    Each POST ends by ``timeout`` seconds after the round began, whatever the
    endpoint does; the failures are :class:`WebhookError` with a message that
    never quotes the URL.
    """
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(len(items), 32)) as pool:
        return list(pool.map(lambda item: _outcome(item[0], item[1], timeout), items))
