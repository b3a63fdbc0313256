"""One row per recorded call, as ``ledger export --format ndjson|csv|focus`` writes it.

A row joins a ``budget.record_call`` with the verdict it settled (when that
verdict is in the chain within the reservation's lifetime before it). The
FOCUS form maps the row onto the FinOps FOCUS 1.2 columns a cost tool
imports; the NDJSON form ends with a manifest signed by the home's key, whose
``sha256`` covers the bytes of every line before it.
"""

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ledger.core.rollups import token_counts, usd6

ROW_COLUMNS = (
    "ts_utc", "day", "verdict", "estimated_usd", "usd", "usd_micros", "provider", "model",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "reasoning_tokens", "agent", "session", "key", "tags", "client", "verdict_ref",
    "entry_hash",
)  # fmt: skip
MANIFEST = "_manifest"
FOCUS_VERSION = "1.2"
FOCUS_COLUMNS = (
    "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency",
    "BillingAccountId", "BillingAccountName", "BillingPeriodStart", "BillingPeriodEnd",
    "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeClass",
    "ChargeDescription", "ChargeFrequency", "InvoiceIssuerName", "ProviderName",
    "PublisherName", "PricingQuantity", "PricingUnit", "ConsumedQuantity", "ConsumedUnit",
    "ServiceCategory", "ServiceSubcategory", "ServiceName", "ResourceId", "ResourceName",
    "ResourceType", "SubAccountId", "SubAccountName", "Tags", "x_VerdictRef", "x_EntryHash",
    "x_Verdict", "x_EstimatedCost", "x_InputTokens", "x_OutputTokens", "x_CacheReadTokens",
    "x_CacheWriteTokens",
)  # fmt: skip


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def verdict_facts(verdict: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """What a row keeps of the verdict it settled."""
    estimate = payload.get("estimated_micros")
    return {
        "verdict": verdict,
        "estimated_usd": usd6(estimate) if isinstance(estimate, int) else None,
    }


def call_row(
    ts_utc: str,
    day: str,
    entry_hash: str,
    payload: Mapping[str, Any],
    verdict: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The export row of one record (its folded payload) and its verdict's facts."""
    tokens_in, tokens_out, cache_read, cache_write = token_counts(payload)
    tokens = payload.get("tokens")
    reasoning = tokens.get("reasoning", 0) if isinstance(tokens, dict) else 0
    amount = payload.get("actual_micros")
    micros = amount if isinstance(amount, int) else None
    tags = payload.get("tags")
    return {
        "ts_utc": ts_utc,
        "day": day,
        "verdict": None if verdict is None else verdict["verdict"],
        "estimated_usd": None if verdict is None else verdict["estimated_usd"],
        "usd": None if micros is None else usd6(micros),
        "usd_micros": micros,
        "provider": payload.get("provider"),
        "model": _text(payload.get("model_id")),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
        "reasoning_tokens": reasoning,
        "agent": _text(payload.get("agent")),
        "session": _text(payload.get("cycle_id")),
        "key": _text(payload.get("key")),
        "tags": sorted(tag for tag in tags if isinstance(tag, str))
        if isinstance(tags, list)
        else [],
        "client": _text(payload.get("client")),
        "verdict_ref": _text(payload.get("verdict_ref")),
        "entry_hash": entry_hash,
    }


def ndjson_line(row: Mapping[str, Any]) -> bytes:
    """A row as one NDJSON line (keys sorted, UTF-8, ``\\n``-terminated)."""
    return (
        json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    )


def csv_cells(row: Mapping[str, Any]) -> list[str]:
    """A row as CSV cells in ``ROW_COLUMNS`` order (tags joined by ``;``; none: empty)."""
    cells = []
    for name in ROW_COLUMNS:
        value = row[name]
        if name == "tags":
            cells.append(";".join(value))
        else:
            cells.append("" if value is None else str(value))
    return cells


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def focus_cells(row: Mapping[str, Any]) -> list[str]:
    """A row as FOCUS 1.2 cells in ``FOCUS_COLUMNS`` order.

    The charge period is the hour the call was recorded in, the billing period
    its calendar month (UTC). A call is priced at list prices (the price
    table), so billed, effective, list and contracted cost are one figure.
    """
    moment = dt.datetime.fromisoformat(row["ts_utc"])
    hour = moment.replace(minute=0, second=0, microsecond=0)
    month = hour.replace(day=1, hour=0)
    following = (month + dt.timedelta(days=32)).replace(day=1)
    cost = row["usd"] or usd6(0)
    provider = row["provider"] or "unknown"
    model = row["model"] or "unknown"
    consumed = sum(
        row[name]
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    )
    tags = {
        name: row[name] for name in ("agent", "session", "key", "client") if row[name] is not None
    }
    if row["tags"]:
        tags["tags"] = ",".join(row["tags"])
    values: dict[str, str] = {
        "BilledCost": cost,
        "EffectiveCost": cost,
        "ListCost": cost,
        "ContractedCost": cost,
        "BillingCurrency": "USD",
        "BillingAccountId": provider,
        "BillingAccountName": provider,
        "BillingPeriodStart": _iso(month),
        "BillingPeriodEnd": _iso(following),
        "ChargePeriodStart": _iso(hour),
        "ChargePeriodEnd": _iso(hour + dt.timedelta(hours=1)),
        "ChargeCategory": "Usage",
        "ChargeClass": "",
        "ChargeDescription": f"{model} call ({consumed} tokens)",
        "ChargeFrequency": "Usage-Based",
        "InvoiceIssuerName": provider,
        "ProviderName": provider,
        "PublisherName": provider,
        "PricingQuantity": str(consumed),
        "PricingUnit": "Tokens",
        "ConsumedQuantity": str(consumed),
        "ConsumedUnit": "Tokens",
        "ServiceCategory": "AI and Machine Learning",
        "ServiceSubcategory": "Generative AI",
        "ServiceName": f"{provider} API",
        "ResourceId": model,
        "ResourceName": model,
        "ResourceType": "Model",
        "SubAccountId": row["key"] or row["agent"] or "",
        "SubAccountName": row["key"] or row["agent"] or "",
        "Tags": json.dumps(tags, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
        "x_VerdictRef": row["verdict_ref"] or "",
        "x_EntryHash": row["entry_hash"],
        "x_Verdict": row["verdict"] or "",
        "x_EstimatedCost": row["estimated_usd"] or "",
        "x_InputTokens": str(row["input_tokens"]),
        "x_OutputTokens": str(row["output_tokens"]),
        "x_CacheReadTokens": str(row["cache_read_tokens"]),
        "x_CacheWriteTokens": str(row["cache_write_tokens"]),
    }
    return [values[name] for name in FOCUS_COLUMNS]


def manifest_body(
    rows: int, first: str, last: str, digest: str, entries: int, head: str | None, key_id: str
) -> dict[str, Any]:
    """The manifest without its signature (what the signature covers, as canonical JSON)."""
    return {
        "rows": rows,
        "from": first,
        "to": last,
        "sha256": digest,
        "chain_entries": entries,
        "head_hash": head,
        "key_id": key_id,
    }


class ExportDigest:
    """The SHA-256 of the bytes written so far, and the number of rows."""

    def __init__(self) -> None:
        self.hasher = hashlib.sha256()
        self.rows = 0

    def line(self, data: bytes) -> bytes:
        """Count and hash one row's line; returns it."""
        self.hasher.update(data)
        self.rows += 1
        return data

    def hexdigest(self) -> str:
        """The digest so far."""
        return self.hasher.hexdigest()
