#!/usr/bin/env python3
"""UsageObserver for Anthropic: today's (UTC) cost from the Admin API cost report.

Run by ledger as ``anthropic_cost.py <provider>``; prints exactly one JSON object
(SPEC §5) and exits 0, whatever happens:

* ``{"usd_used": N, "billing_ts": "...", "server_ts": "..."}`` on success;
* ``{"_defer": true, "_reason": "rate_limited"}`` on HTTP 429;
* ``{"_unreachable": true, "_reason": "..."}`` otherwise (no key, network error,
  timeout, 401/403, other 4xx/5xx, a body that is not the documented shape).

API (https://platform.claude.com/docs/en/api/admin/cost_report/retrieve and
https://platform.claude.com/docs/en/manage-claude/usage-cost-api):
``GET /v1/organizations/cost_report`` with headers ``x-api-key`` (an Admin API
key, ``sk-ant-admin...``) and ``anthropic-version: 2023-06-01``; query
``starting_at`` (RFC 3339; buckets starting on or after it), ``bucket_width=1d``
(the only width this endpoint has), optional ``ending_at``, ``group_by[]``,
``limit`` and ``page`` (the previous response's ``next_page``). The response is
``{"data": [{"starting_at", "ending_at", "results": [{"amount", "currency",
...}]}], "has_more", "next_page"}``; ``amount`` is a decimal string in the
currency's lowest unit (cents): ``"123.45"`` USD is $1.2345.  Priority Tier
costs are not in this report.

Environment: ``ANTHROPIC_ADMIN_KEY`` (required); ``ANTHROPIC_API_BASE`` (default
``https://api.anthropic.com``, for tests and proxies; a trailing ``/v1`` is
ignored); ``LEDGER_OBSERVER_BILLING_TS`` = ``end`` (default) or ``start`` (see
below); ``LEDGER_OBSERVER_HTTP_TIMEOUT`` (seconds for all requests, default 20);
``LEDGER_OBSERVER_NOW`` (ISO-8601; replaces the clock that decides "today").

``billing_ts``: the cost report only has daily buckets, so it cannot say how
current today's figure is. By default (``end``) the figure is taken as complete
up to the newest bucket's ``ending_at``, capped at the server's ``Date`` (the
bucket is still open): the reading is as current as the provider's answer.
``start`` uses the newest bucket's ``starting_at`` instead (today 00:00 UTC), so
ledger's ``provider_lag`` rule treats the figure as lagging all day — fail-closed
near the cap. The provider id argument is ignored: the figure is the whole
organisation's Anthropic cost.
"""

import datetime as dt
import email.utils
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from decimal import Context, Decimal, Inexact, InvalidOperation
from typing import Any, NoReturn

DEFAULT_BASE = "https://api.anthropic.com"
ENDPOINT = "/v1/organizations/cost_report"
API_VERSION = "2023-06-01"
KEY_VAR = "ANTHROPIC_ADMIN_KEY"
MAX_PAGES = 50
MAX_BODY_BYTES = 8 * 1024 * 1024
EXACT = Context(prec=100, traps=[Inexact, InvalidOperation])


class UnreachableError(Exception):
    """No usable reading; the message is the reason."""


class DeferError(Exception):
    """Ask again later; the message is the reason."""


def fail(reason: str) -> NoReturn:
    """Stop with an unreachable result."""
    raise UnreachableError(reason)


def now_utc() -> dt.datetime:
    """The current time: ``LEDGER_OBSERVER_NOW`` if set, else the system clock."""
    fixed = os.environ.get("LEDGER_OBSERVER_NOW")
    if fixed:
        return parse_time(fixed, "LEDGER_OBSERVER_NOW", prefix="")
    return dt.datetime.now(dt.UTC)  # noqa: TID251 - a standalone program reads its own clock


def parse_time(text: object, what: str, prefix: str = "unexpected response: ") -> dt.datetime:
    """An RFC 3339 time as an aware UTC datetime."""
    if not isinstance(text, str):
        fail(f"{prefix}{what} is not a string")
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        fail(f"{prefix}{what} is not a time: {text[:40]!r}")
    if moment.tzinfo is None:
        fail(f"{prefix}{what} has no timezone")
    return moment.astimezone(dt.UTC)


def iso(moment: dt.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def base_url() -> str:
    """The API base from ``ANTHROPIC_API_BASE``; http(s) only."""
    base = os.environ.get("ANTHROPIC_API_BASE") or DEFAULT_BASE
    base = base.rstrip("/")
    base = base.removesuffix("/v1")
    if urllib.parse.urlsplit(base).scheme not in {"http", "https"}:
        fail("ANTHROPIC_API_BASE must be an http(s) URL")
    return base


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: the admin key must not travel to another URL."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        """Refuse every redirect."""
        return


OPENER = urllib.request.build_opener(NoRedirect)


def http_failure(status: int) -> NoReturn:
    """Stop on an HTTP error status: 429 defers, everything else is unreachable."""
    if status == 429:
        raise DeferError("rate_limited")
    if status in {401, 403}:
        fail(f"HTTP {status}: the admin key was refused (check ANTHROPIC_ADMIN_KEY)")
    if 300 <= status < 400:
        fail(f"HTTP {status}: unexpected redirect")
    fail(f"HTTP {status} from the cost report API")


def decode(body: bytes) -> Any:
    """The JSON body, numbers as ``Decimal``."""
    if len(body) > MAX_BODY_BYTES:
        fail("unexpected response: body too large")
    try:
        return json.loads(body, parse_float=Decimal, parse_int=Decimal)
    except (ValueError, RecursionError):
        fail("unexpected response: body is not JSON")


def get_json(url: str, headers: dict[str, str], deadline: float) -> tuple[Any, str | None]:
    """GET ``url``; the decoded body and the ``Date`` header."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        fail("timed out")
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with OPENER.open(request, timeout=remaining) as response:
            body = response.read(MAX_BODY_BYTES + 1)
            date = response.headers.get("Date")
    except urllib.error.HTTPError as exc:
        exc.close()
        http_failure(exc.code)
    except TimeoutError:
        fail("timed out")
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            fail("timed out")
        fail(f"network error: {exc.reason}")
    except (OSError, ValueError) as exc:
        fail(f"network error: {exc}")
    return decode(body), date


def server_time(date: str | None) -> dt.datetime | None:
    """The HTTP ``Date`` header as an aware UTC datetime, if usable."""
    if not date:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # "-0000": RFC 9110 dates are GMT
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def amount_usd(result: object) -> Decimal:
    """One cost item in USD: ``amount`` is in cents (the currency's lowest unit)."""
    if not isinstance(result, dict):
        fail("unexpected response: a result is not an object")
    currency = result.get("currency")
    if not isinstance(currency, str) or currency.upper() != "USD":
        fail(f"unexpected response: currency {currency!r} is not USD")
    raw = result.get("amount")
    if isinstance(raw, bool) or not isinstance(raw, (str, Decimal)):
        fail("unexpected response: amount is not a decimal string")
    try:
        cents = Decimal(str(raw).strip())
    except InvalidOperation:
        fail(f"unexpected response: amount {str(raw)[:40]!r} is not a number")
    if not cents.is_finite():
        fail("unexpected response: amount is not finite")
    return EXACT.scaleb(cents, -2)


def request_headers(key: str) -> dict[str, str]:
    """The documented Admin API headers."""
    return {
        "x-api-key": key,
        "anthropic-version": API_VERSION,
        "accept": "application/json",
        "user-agent": "ledger-observer/1",
    }


def first_query(day_start: dt.datetime) -> dict[str, str]:
    """Daily buckets from today 00:00 UTC."""
    return {"starting_at": day_start.strftime("%Y-%m-%dT%H:%M:%SZ"), "bucket_width": "1d"}


def bucket_parts(bucket: object) -> tuple[dt.datetime, dt.datetime, list[Any]]:
    """A bucket's start, end and cost items."""
    if not isinstance(bucket, dict) or not isinstance(bucket.get("results"), list):
        fail("unexpected response: a bucket has no results list")
    start = parse_time(bucket.get("starting_at"), "starting_at")
    end = parse_time(bucket.get("ending_at"), "ending_at")
    return start, end, bucket["results"]


def settings(key_var: str) -> tuple[str, str, float]:
    """The admin key, the ``billing_ts`` mode and the HTTP time budget."""
    key = os.environ.get(key_var, "").strip()
    if not key:
        fail(f"{key_var} is not set")
    mode = os.environ.get("LEDGER_OBSERVER_BILLING_TS", "end")
    if mode not in {"end", "start"}:
        fail("LEDGER_OBSERVER_BILLING_TS must be 'end' or 'start'")
    try:
        budget = float(os.environ.get("LEDGER_OBSERVER_HTTP_TIMEOUT", "20"))
    except ValueError:
        fail("LEDGER_OBSERVER_HTTP_TIMEOUT is not a number")
    return key, mode, budget


Span = tuple[dt.datetime, dt.datetime]


def add_page(
    page: object, day_start: dt.datetime, total: Decimal, newest: Span | None
) -> tuple[Decimal, Span | None]:
    """Add one page's buckets of today (UTC) to the running total."""
    if not isinstance(page, dict) or not isinstance(page.get("data"), list):
        fail("unexpected response: no data list")
    day_end = day_start + dt.timedelta(days=1)
    for bucket in page["data"]:
        start, end, results = bucket_parts(bucket)
        if not day_start <= start < day_end:
            continue  # not today (UTC)
        for result in results:
            total = EXACT.add(total, amount_usd(result))
        if newest is None or start > newest[0]:
            newest = (start, end)
    return total, newest


def next_page(page: dict[str, Any], seen: set[str]) -> str | None:
    """The cursor for the next page, or ``None`` after the last one."""
    has_more = page.get("has_more")
    if has_more is not True:
        if has_more is not False and has_more is not None:
            fail("unexpected response: has_more is not a boolean")
        return None
    token = page.get("next_page")
    if not isinstance(token, str) or not token or token in seen:
        fail("unexpected response: has_more without a new next_page")
    seen.add(token)
    return token


def fetch_today(
    headers: dict[str, str], query: dict[str, str], deadline: float, day_start: dt.datetime
) -> tuple[Decimal, Span | None, str | None]:
    """Today's total over every page, the newest bucket of today, the last ``Date`` header."""
    total = Decimal(0)
    newest: Span | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        url = f"{base_url()}{ENDPOINT}?{urllib.parse.urlencode(query)}"
        page, date = get_json(url, headers, deadline)
        total, newest = add_page(page, day_start, total, newest)
        token = next_page(page, seen)
        if token is None:
            return total, newest, date
        query["page"] = token
    fail(f"unexpected response: more than {MAX_PAGES} pages")


def billing_time(
    mode: str, newest: Span | None, day_start: dt.datetime, answered: dt.datetime
) -> dt.datetime:
    """``billing_ts``: see the module docstring."""
    if mode == "start":
        return day_start if newest is None else newest[0]
    if newest is None:
        return answered  # no cost today, as of the provider's answer
    return min(newest[1], answered)


def observe() -> dict[str, Any]:
    """Query today's cost; the SPEC success object."""
    key, mode, budget = settings(KEY_VAR)
    deadline = time.monotonic() + budget
    now = now_utc()
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    total, newest, date = fetch_today(
        request_headers(key), first_query(day_start), deadline, day_start
    )
    if total < 0:
        fail("unexpected response: today's cost is negative")
    server_ts = server_time(date)
    billing_ts = billing_time(mode, newest, day_start, server_ts or now)
    reading: dict[str, Any] = {"usd_used": total, "billing_ts": iso(billing_ts)}
    if server_ts is not None:
        reading["server_ts"] = iso(server_ts)
    return reading


def dumps(obj: dict[str, Any]) -> str:
    """JSON with ``Decimal`` amounts written exactly (never through float)."""
    parts = []
    for name, value in obj.items():
        text = format(value, "f") if isinstance(value, Decimal) else json.dumps(value)
        parts.append(f"{json.dumps(name)}: {text}")
    return "{" + ", ".join(parts) + "}"


def main(argv: list[str]) -> int:
    """Print one SPEC-shaped object; always exit 0."""
    del argv  # the provider id: the figure is the whole organisation's cost
    try:
        out: dict[str, Any] = observe()
    except DeferError as exc:
        out = {"_defer": True, "_reason": str(exc)}
    except UnreachableError as exc:
        out = {"_unreachable": True, "_reason": str(exc)}
    except Exception as exc:
        out = {"_unreachable": True, "_reason": f"observer error: {type(exc).__name__}"}
    sys.stdout.write(dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
