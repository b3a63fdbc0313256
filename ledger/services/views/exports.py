"""``ledger export --format ndjson|csv|focus`` and ``ledger verify-export`` (SPEC §19).

An export reads only the part of the chain its range needs: the rollups'
marks give the chain position before the first entry of a quarter hour, so
reading starts a reservation's lifetime before the range (to find the
verdicts its first records settle) and stops at the first entry after it.
Every line read is verified (signature and link from the mark's position).

The NDJSON form ends with a manifest signed by the home's writer key; its
``sha256`` covers every byte before it, so a row edited, removed, added or
moved fails ``verify-export``. On the home, ``verify-export`` also checks that
the rows are exactly the chain's records between the first and the last one.
"""

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.core.canonical import canonical_bytes
from ledger.core.export_rows import (
    MANIFEST,
    ExportDigest,
    call_row,
    manifest_body,
    ndjson_line,
    verdict_facts,
)
from ledger.core.foldable import Foldable, check_entry
from ledger.core.rollups import slot_start
from ledger.core.timefmt import format_ts, parse_ts
from ledger.errors import CanonicalizationError, ChainBrokenError, InputDataError
from ledger.services.chain.schema_lookup import schema_lookup
from ledger.services.views.metrics import VERDICT_EVENTS
from ledger.services.views.rollup_ports import RollupDeps
from ledger.services.views.rollups import Caught, mark_before, slot_range

if TYPE_CHECKING:
    from ledger.core.envelope import ParsedEntry


@dataclass(slots=True)
class ExportResult:
    """What an export wrote."""

    rows: int
    caught: Caught
    manifest: dict[str, Any] | None


def _walk(
    deps: RollupDeps,
    begin: dt.datetime,
    end: dt.datetime,
    zone: dt.tzinfo,
    on_row: Callable[[dict[str, Any]], None],
) -> Caught:
    """Call ``on_row`` for each record sealed in ``[begin, end)``, in chain order."""
    from ledger.core.chain import ChainVerifier

    lookback = dt.timedelta(seconds=int(deps.config.reservation_ttl_seconds) + 60)
    caught, mark = mark_before(deps, begin - lookback)
    if mark is None or caught.entries == 0:
        return caught
    schema_for = schema_lookup(deps)
    first, stop = format_ts(begin), format_ts(end)
    verdicts: dict[str, dict[str, Any]] = {}
    done = False

    def see(parsed: "ParsedEntry") -> None:
        nonlocal done
        ts = parsed.ts_utc
        if ts >= stop:
            done = True
            return
        outcome = VERDICT_EVENTS.get(parsed.event_type)
        payload: Any = parsed.payload
        if outcome is not None and isinstance(payload, dict):
            verdicts[parsed.entry_hash] = verdict_facts(str(outcome), payload)
        elif parsed.event_type == "budget.record_call" and ts >= first:
            checked = check_entry(parsed.event_type, ts, payload, schema_for)
            if not isinstance(checked, Foldable):
                return
            body = checked.payload
            ref = body.get("verdict_ref")
            day = parse_ts(ts).astimezone(zone).date().isoformat()
            on_row(call_row(ts, day, parsed.entry_hash, body, verdicts.get(ref or "")))

    verifier = ChainVerifier(
        deps.keys.load_trust(), expected_prev=mark[2], first_line=int(mark[0]) + 1, on_entry=see
    )
    for raw in deps.chain.iter_lines(int(mark[1]), caught.size):
        if not verifier.feed(raw) or done:
            break
    report = verifier.report()
    if not report.ok:
        raise ChainBrokenError(report.line or 0, report.reason or "does not verify")
    return caught


def export_calls(
    deps: RollupDeps,
    start: str,
    end: str,
    tz: dt.tzinfo | None,
    write: Callable[[dict[str, Any]], None],
) -> Caught:
    """Call ``write`` with each call recorded on the budget days ``start`` to ``end``.

    Raises:
        UsageError: an empty range or an unusable zone.
        ChainBrokenError: the chain does not verify.
        CheckpointDisagreesError: the chain disagrees with its newest checkpoint.
    """
    zone = tz if tz is not None else deps.config.day_zone
    first_slot, end_slot = slot_range(start, end, zone)
    return _walk(deps, slot_start(first_slot), slot_start(end_slot), zone, write)


def export_ndjson(
    deps: RollupDeps, start: str, end: str, tz: dt.tzinfo | None, out: Callable[[bytes], None]
) -> ExportResult:
    """The NDJSON export: a line per call, then the signed manifest line."""
    digest = ExportDigest()
    caught = export_calls(deps, start, end, tz, lambda row: out(digest.line(ndjson_line(row))))
    trust = deps.keys.load_trust()
    signer: Any = deps.keys.active_signer(trust)  # type: ignore[attr-defined]
    body = manifest_body(
        digest.rows, start, end, digest.hexdigest(), caught.entries, caught.head_hash,
        signer.key_id,
    )  # fmt: skip
    manifest = {**body, "signature": signer.sign_b64(canonical_bytes(body))}
    out(json.dumps({MANIFEST: manifest}, separators=(",", ":")).encode() + b"\n")
    return ExportResult(digest.rows, caught, manifest)


@dataclass(slots=True)
class ExportCheck:
    """What ``verify-export`` found."""

    ok: bool
    reason: str | None
    manifest: dict[str, Any] | None
    rows: list[dict[str, Any]]


def read_export(data: bytes) -> tuple[list[bytes], dict[str, Any]]:
    """The row lines and the manifest of an NDJSON export.

    Raises:
        InputDataError: not an export (no manifest line at its end, not JSON).
    """
    lines = data.splitlines(keepends=True)
    if not lines or not lines[-1].endswith(b"\n"):
        raise InputDataError("not an export: it does not end with a manifest line")
    try:
        last = json.loads(lines[-1])
    except (ValueError, UnicodeDecodeError):
        raise InputDataError("not an export: its last line is not JSON") from None
    manifest = last.get(MANIFEST) if isinstance(last, dict) else None
    if not isinstance(manifest, dict):
        raise InputDataError("not an export: its last line is not a manifest")
    return lines[:-1], manifest


def check_export(data: bytes, public_key_for: Callable[[str], bytes | None]) -> ExportCheck:
    """Check an export's manifest: digest, row count and signature.

    Raises:
        InputDataError: not an export.
    """
    from ledger.core.signing import verify_b64

    lines, manifest = read_export(data)
    body = {key: value for key, value in manifest.items() if key != "signature"}
    digest = hashlib.sha256(b"".join(lines)).hexdigest()
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            return ExportCheck(False, f"line {number} is not JSON", manifest, [])
        rows.append(row if isinstance(row, dict) else {})
    if manifest.get("sha256") != digest:
        return ExportCheck(False, "the rows' sha256 differs from the manifest's", manifest, rows)
    if manifest.get("rows") != len(lines):
        return ExportCheck(False, "the number of rows differs from the manifest's", manifest, rows)
    key_id, signature = manifest.get("key_id"), manifest.get("signature")
    public = public_key_for(key_id) if isinstance(key_id, str) else None
    if public is None:
        return ExportCheck(
            False, f"no trusted key {key_id!r} to check the signature", manifest, rows
        )
    try:
        message = canonical_bytes(body)
    except (ValueError, TypeError, CanonicalizationError):
        return ExportCheck(False, "the manifest cannot be read as canonical JSON", manifest, rows)
    if not (isinstance(signature, str) and verify_b64(public, signature, message)):
        return ExportCheck(False, "the manifest's signature does not verify", manifest, rows)
    return ExportCheck(True, None, manifest, rows)


def rows_in_chain(deps: RollupDeps, rows: list[dict[str, Any]]) -> str | None:
    """Why the rows are not exactly the chain's records from the first to the last, or ``None``."""
    if not rows:
        return None
    try:
        times = [parse_ts(row["ts_utc"]) for row in rows]
        hashes = [str(row["entry_hash"]) for row in rows]
    except (KeyError, TypeError, ValueError):
        return "a row has no ts_utc or entry_hash"
    begin, end = min(times), max(times) + dt.timedelta(microseconds=1)
    found: list[str] = []
    _walk(deps, begin, end, dt.UTC, lambda row: found.append(row["entry_hash"]))
    known = set(found)
    missing = [value for value in hashes if value not in known]
    if missing:
        return f"entry {missing[0]} is not a record in this home's chain"
    if found != hashes:
        return (
            f"the chain has {len(found)} records from the first row to the last, "
            f"the export {len(hashes)} (or in another order)"
        )
    return None
