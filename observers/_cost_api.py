"""What the HTTP cost observers share: ``anthropic_cost.py`` and ``openai_cost.py``.

Not an observer itself. Each observer script describes its provider's cost API
as a ``CostApi`` (endpoint, headers, query, how to read a bucket and an amount)
and calls ``main``; everything else is here. The scripts import this module by
its plain name (Python puts a script's own directory first on ``sys.path``), so
it must stay next to them.

An observer is run by ledger as ``<script> <provider>``; it prints exactly one
JSON object (the observer output ledger reads) and exits 0, whatever happens:

* ``{"usd_used": N, "billing_ts": "...", "server_ts": "..."}`` on success;
* ``{"_defer": true, "_reason": "rate_limited"}`` on HTTP 429;
* ``{"_unreachable": true, "_reason": "..."}`` otherwise (no key, network error,
  timeout, 401/403, other 4xx/5xx, a body that is not the documented shape).

It asks for daily buckets from today 00:00 UTC, follows ``has_more`` /
``next_page`` (passed back as ``page``; at most 50 pages, no redirects, at most
8 MiB a body) and adds up, in exact decimal arithmetic, the USD amounts of every
bucket that starts today (UTC). The provider id argument is ignored: the figure
is the whole organisation's cost with that provider.

Environment, besides the provider's ``*_ADMIN_KEY`` (required) and
``*_API_BASE`` (a trailing ``/v1`` is ignored): ``LEDGER_OBSERVER_BILLING_TS`` =
``end`` (default) or ``start`` (see below); ``LEDGER_OBSERVER_HTTP_TIMEOUT``
(seconds for all requests, default 20); ``LEDGER_OBSERVER_NOW`` (ISO-8601;
replaces the clock that decides "today").

``billing_ts``: the cost APIs only have daily buckets, so they cannot say how
current today's figure is. By default (``end``) the figure is taken as complete
up to the newest bucket's end, capped at the server's ``Date`` (the bucket is
still open): the reading is as current as the provider's answer. ``start`` uses
the newest bucket's start instead (today 00:00 UTC), so ledger's
``provider_lag`` rule treats the figure as lagging all day — fail-closed near
the cap.
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
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal, Inexact, InvalidOperation
from typing import Any, NoReturn

MAX_PAGES = 50
MAX_BODY_BYTES = 8 * 1024 * 1024
EXACT = Context(prec=100, traps=[Inexact, InvalidOperation])

Span = tuple[dt.datetime, dt.datetime]
Bucket = tuple[dt.datetime, dt.datetime, list[Any]]


class UnreachableError(Exception):
    """No usable reading; the message is the reason."""


class DeferError(Exception):
    """Ask again later; the message is the reason."""


def fail(reason: str) -> NoReturn:
    """Stop with an unreachable result."""
    raise UnreachableError(reason)


def parse_now_iso(text: str) -> dt.datetime:
    """``LEDGER_OBSERVER_NOW`` (ISO-8601) as an aware UTC datetime."""
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        fail("LEDGER_OBSERVER_NOW is not an ISO-8601 time")
    if moment.tzinfo is None:
        fail("LEDGER_OBSERVER_NOW has no timezone")
    return moment.astimezone(dt.UTC)


@dataclass(frozen=True)
class CostApi:
    """One provider's cost API: what differs between the observers.

    Attributes:
        key_var: the environment variable holding the admin key.
        base_var: the environment variable that may replace ``default_base``.
        default_base: the API's base URL.
        endpoint: the cost endpoint's path.
        name: the API as named in HTTP error reasons (``HTTP 500 from the <name>``).
        request_headers: the request headers for an admin key.
        first_query: the query for daily buckets from the given day start (UTC).
        bucket_parts: a bucket's start, end and cost items; fails on a bad bucket.
        amount_usd: one cost item in USD; fails on a bad item.
        parse_now: reads ``LEDGER_OBSERVER_NOW`` (default ``parse_now_iso``).
    """

    key_var: str
    base_var: str
    default_base: str
    endpoint: str
    name: str
    request_headers: Callable[[str], dict[str, str]]
    first_query: Callable[[dt.datetime], dict[str, str]]
    bucket_parts: Callable[[object], Bucket]
    amount_usd: Callable[[object], Decimal]
    parse_now: Callable[[str], dt.datetime] = parse_now_iso


def decimal_amount(raw: object, what: str, kind: str = "a number") -> Decimal:
    """A finite amount from a JSON string or number; ``what`` names it in reasons."""
    if isinstance(raw, bool) or not isinstance(raw, (str, Decimal)):
        fail(f"unexpected response: {what} is not {kind}")
    try:
        value = Decimal(str(raw).strip())
    except InvalidOperation:
        fail(f"unexpected response: {what} {str(raw)[:40]!r} is not a number")
    if not value.is_finite():
        fail(f"unexpected response: {what} is not finite")
    return value


def now_utc(api: CostApi) -> dt.datetime:
    """The current time: ``LEDGER_OBSERVER_NOW`` if set, else the system clock."""
    fixed = os.environ.get("LEDGER_OBSERVER_NOW")
    if fixed:
        return api.parse_now(fixed)
    return dt.datetime.now(dt.UTC)  # noqa: TID251 - a standalone program reads its own clock


def iso(moment: dt.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def base_url(api: CostApi) -> str:
    """The API base from ``api.base_var``; http(s) only."""
    base = os.environ.get(api.base_var) or api.default_base
    base = base.rstrip("/")
    base = base.removesuffix("/v1")
    if urllib.parse.urlsplit(base).scheme not in {"http", "https"}:
        fail(f"{api.base_var} must be an http(s) URL")
    return base


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: the admin key must not travel to another URL."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        """Refuse every redirect."""
        return


OPENER = urllib.request.build_opener(NoRedirect)


def http_failure(api: CostApi, status: int) -> NoReturn:
    """Stop on an HTTP error status: 429 defers, everything else is unreachable."""
    if status == 429:
        raise DeferError("rate_limited")
    if status in {401, 403}:
        fail(f"HTTP {status}: the admin key was refused (check {api.key_var})")
    if 300 <= status < 400:
        fail(f"HTTP {status}: unexpected redirect")
    fail(f"HTTP {status} from the {api.name}")


def decode(body: bytes) -> Any:
    """The JSON body, numbers as ``Decimal``."""
    if len(body) > MAX_BODY_BYTES:
        fail("unexpected response: body too large")
    try:
        return json.loads(body, parse_float=Decimal, parse_int=Decimal)
    except (ValueError, RecursionError):
        fail("unexpected response: body is not JSON")


def get_json(
    api: CostApi, url: str, headers: dict[str, str], deadline: float
) -> tuple[Any, str | None]:
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
        http_failure(api, exc.code)
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


def add_page(
    api: CostApi, page: object, day_start: dt.datetime, total: Decimal, newest: Span | None
) -> tuple[Decimal, Span | None]:
    """Add one page's buckets of today (UTC) to the running total."""
    if not isinstance(page, dict) or not isinstance(page.get("data"), list):
        fail("unexpected response: no data list")
    day_end = day_start + dt.timedelta(days=1)
    for bucket in page["data"]:
        start, end, results = api.bucket_parts(bucket)
        if not day_start <= start < day_end:
            continue  # not today (UTC)
        for result in results:
            total = EXACT.add(total, api.amount_usd(result))
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
    api: CostApi,
    headers: dict[str, str],
    query: dict[str, str],
    deadline: float,
    day_start: dt.datetime,
) -> tuple[Decimal, Span | None, str | None]:
    """Today's total over every page, the newest bucket of today, the last ``Date`` header."""
    total = Decimal(0)
    newest: Span | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        url = f"{base_url(api)}{api.endpoint}?{urllib.parse.urlencode(query)}"
        page, date = get_json(api, url, headers, deadline)
        total, newest = add_page(api, page, day_start, total, newest)
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


def observe(api: CostApi) -> dict[str, Any]:
    """Query today's cost; the success object (usd_used, billing_ts)."""
    key, mode, budget = settings(api.key_var)
    deadline = time.monotonic() + budget
    now = now_utc(api)
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    total, newest, date = fetch_today(
        api, api.request_headers(key), api.first_query(day_start), deadline, day_start
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


def main(api: CostApi, argv: list[str]) -> int:
    """Print one observer object; always exit 0."""
    del argv  # the provider id: the figure is the whole organisation's cost
    try:
        out: dict[str, Any] = observe(api)
    except DeferError as exc:
        out = {"_defer": True, "_reason": str(exc)}
    except UnreachableError as exc:
        out = {"_unreachable": True, "_reason": str(exc)}
    except Exception as exc:
        out = {"_unreachable": True, "_reason": f"observer error: {type(exc).__name__}"}
    sys.stdout.write(dumps(out) + "\n")
    sys.stdout.flush()
    return 0
