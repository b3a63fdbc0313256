#!/usr/bin/env python3
"""UsageObserver for OpenAI: today's (UTC) cost from the organization Costs API.

Run by ledger as ``openai_cost.py <provider>``; prints exactly one JSON object
(an observer object) and exits 0, whatever happens. This file holds what is particular to
OpenAI's API; the output, errors, paging, ``billing_ts`` and the shared
``LEDGER_OBSERVER_*`` variables are in ``_cost_api.py``, which must sit next to it.

API (https://developers.openai.com/api/reference/resources/organization/subresources/audit_logs/methods/get_costs,
the "Costs" page of the OpenAI API reference, Usage section):
``GET /v1/organization/costs`` with ``Authorization: Bearer <admin key>``; query
``start_time`` (Unix seconds, inclusive), optional ``end_time`` (exclusive),
``bucket_width=1d`` (the only width), ``limit`` (1-180, default 7),
``group_by``, ``project_ids`` and ``page`` (the previous response's
``next_page``). The response is ``{"object": "page", "data": [{"object":
"bucket", "start_time", "end_time", "results": [{"object":
"organization.costs.result", "amount": {"value": <number>, "currency": "usd"},
"line_item", "project_id"}]}], "has_more", "next_page"}``; ``amount.value`` is
in dollars. (The generated reference names the list ``result``; the documented
example and the live API use ``results``; both are accepted.)

Environment: ``OPENAI_ADMIN_KEY`` (required); ``OPENAI_API_BASE`` (default
``https://api.openai.com``, for tests and proxies; a trailing ``/v1`` is
ignored); the ``LEDGER_OBSERVER_*`` variables of ``_cost_api.py``.

``billing_ts`` is the newest bucket's ``end_time`` capped at the server's
``Date`` (``end``, the default) or its ``start_time`` (``start``). The figure is
the whole organisation's OpenAI cost.
"""

import datetime as dt
import sys
from decimal import Decimal

from _cost_api import Bucket, CostApi, decimal_amount, fail, main


def unix_time(value: object, what: str) -> dt.datetime:
    """Unix seconds as an aware UTC datetime."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        fail(f"unexpected response: {what} is not a number")
    try:
        return dt.datetime.fromtimestamp(int(value), dt.UTC)
    except (ValueError, OverflowError, OSError):
        fail(f"unexpected response: {what} is out of range")


def amount_usd(result: object) -> Decimal:
    """One cost item in USD: ``amount.value`` is in dollars."""
    if not isinstance(result, dict) or not isinstance(result.get("amount"), dict):
        fail("unexpected response: a result has no amount object")
    amount = result["amount"]
    currency = amount.get("currency")
    if not isinstance(currency, str) or currency.lower() != "usd":
        fail(f"unexpected response: currency {currency!r} is not usd")
    return decimal_amount(amount.get("value"), "amount.value")


def request_headers(key: str) -> dict[str, str]:
    """Bearer authentication with the admin key."""
    return {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "User-Agent": "ledger-observer/1",
    }


def first_query(day_start: dt.datetime) -> dict[str, str]:
    """Daily buckets from today 00:00 UTC (Unix seconds)."""
    return {"start_time": str(int(day_start.timestamp())), "bucket_width": "1d"}


def bucket_parts(bucket: object) -> Bucket:
    """A bucket's start, end and cost items (``results``; ``result`` in the generated reference)."""
    if not isinstance(bucket, dict):
        fail("unexpected response: a bucket is not an object")
    results = bucket.get("results", bucket.get("result"))
    if not isinstance(results, list):
        fail("unexpected response: a bucket has no results list")
    start = unix_time(bucket.get("start_time"), "start_time")
    end = unix_time(bucket.get("end_time"), "end_time")
    return start, end, results


OPENAI = CostApi(
    key_var="OPENAI_ADMIN_KEY",
    base_var="OPENAI_API_BASE",
    default_base="https://api.openai.com",
    endpoint="/v1/organization/costs",
    name="costs API",
    request_headers=request_headers,
    first_query=first_query,
    bucket_parts=bucket_parts,
    amount_usd=amount_usd,
)


if __name__ == "__main__":
    sys.exit(main(OPENAI, sys.argv[1:]))
