"""POST one JSON object to an alert webhook (Slack, Teams or any HTTP endpoint).

The standard library's HTTP client, with a timeout; a status outside 2xx or a
connection error is a failure the caller retries later.
"""

import json
import urllib.error
import urllib.request
from typing import Any

_TIMEOUT_SECONDS = 10.0


class WebhookError(Exception):
    """The webhook did not take the alert (a non-2xx status, or no connection)."""


def post_json(url: str, body: dict[str, Any]) -> None:
    """POST ``body`` as JSON to ``url``.

    Raises:
        WebhookError: the endpoint answered outside 2xx or could not be reached.
    """
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(  # noqa: S310 - the URL is validated as http(s) in config
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:  # noqa: S310
            response.read()
    except urllib.error.HTTPError as exc:
        raise WebhookError(f"HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise WebhookError(str(reason)) from exc
