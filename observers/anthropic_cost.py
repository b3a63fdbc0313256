#!/usr/bin/env python3
"""UsageObserver for Anthropic: today's (UTC) cost from the Admin API cost report.

Run by ledger as ``anthropic_cost.py <provider>``; prints exactly one JSON object
(an observer object) and exits 0, whatever happens. This file holds what is particular to
Anthropic's API; the output, errors, paging, ``billing_ts`` and the shared
``LEDGER_OBSERVER_*`` variables are in ``_cost_api.py``, which must sit next to it.

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
ignored); the ``LEDGER_OBSERVER_*`` variables of ``_cost_api.py``.

``billing_ts`` is the newest bucket's ``ending_at`` capped at the server's
``Date`` (``end``, the default) or its ``starting_at`` (``start``). The figure is
the whole organisation's Anthropic cost.
"""

import datetime as dt
import sys
from decimal import Decimal

from _cost_api import EXACT, Bucket, CostApi, decimal_amount, fail, main

API_VERSION = "2023-06-01"


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


def parse_now(text: str) -> dt.datetime:
    """``LEDGER_OBSERVER_NOW`` as an aware UTC datetime."""
    return parse_time(text, "LEDGER_OBSERVER_NOW", prefix="")


def amount_usd(result: object) -> Decimal:
    """One cost item in USD: ``amount`` is in cents (the currency's lowest unit)."""
    if not isinstance(result, dict):
        fail("unexpected response: a result is not an object")
    currency = result.get("currency")
    if not isinstance(currency, str) or currency.upper() != "USD":
        fail(f"unexpected response: currency {currency!r} is not USD")
    cents = decimal_amount(result.get("amount"), "amount", "a decimal string")
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


def bucket_parts(bucket: object) -> Bucket:
    """A bucket's start, end and cost items."""
    if not isinstance(bucket, dict) or not isinstance(bucket.get("results"), list):
        fail("unexpected response: a bucket has no results list")
    start = parse_time(bucket.get("starting_at"), "starting_at")
    end = parse_time(bucket.get("ending_at"), "ending_at")
    return start, end, bucket["results"]


ANTHROPIC = CostApi(
    key_var="ANTHROPIC_ADMIN_KEY",
    base_var="ANTHROPIC_API_BASE",
    default_base="https://api.anthropic.com",
    endpoint="/v1/organizations/cost_report",
    name="cost report API",
    request_headers=request_headers,
    first_query=first_query,
    bucket_parts=bucket_parts,
    amount_usd=amount_usd,
    parse_now=parse_now,
)


if __name__ == "__main__":
    sys.exit(main(ANTHROPIC, sys.argv[1:]))
