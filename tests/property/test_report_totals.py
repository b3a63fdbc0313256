"""Every report total equals the chain's recorded spend in its range (SPEC §19).

Random records over random days, reporting zones and dimensions, written by
the product itself (``ledger record`` with ``LEDGER_NOW``); the expected
figures are read straight from the chain's ``budget.record_call`` entries.
A report is drawn half-way (so the rollups are caught up incrementally) and
at the end; the CSV form reads back as the JSON form.
"""

import csv
import datetime as dt
import io
import json
import tempfile
import zoneinfo
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.rollups import DIMENSIONS

ZONES = ("UTC", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Adelaide")
START = dt.datetime(2026, 2, 26, tzinfo=dt.UTC)

record_st = st.fixed_dictionaries(
    {
        "minutes": st.integers(0, 8 * 24 * 60),
        "micros": st.integers(0, 3_000_000),
        "provider": st.sampled_from(["openai", "anthropic"]),
        "agent": st.sampled_from([None, "coder", "planner"]),
        "session": st.sampled_from([None, "s1", "s2"]),
        "key": st.sampled_from([None, "alice"]),
        "model": st.sampled_from([None, "m-1", "m-2"]),
        "tags": st.lists(st.sampled_from(["team-a", "team-b"]), unique=True, max_size=2),
    }
)


def _args(item: dict[str, Any]) -> list[str]:
    args = ["record", f"{Decimal(item['micros']) / 1_000_000}", "--provider", item["provider"]]
    for option, name in (("--agent", "agent"), ("--cycle-id", "session"), ("--key", "key"),
                         ("--model-id", "model")):  # fmt: skip
        if item[name] is not None:
            args += [option, item[name]]
    for tag in item["tags"]:
        args += ["--tag", tag]
    return args


def _chain_records(home: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    chain = home / "events.jsonl"
    if not chain.exists():
        return out
    for line in chain.read_text().splitlines():
        entry = json.loads(line)
        if entry["event_type"] == "budget.record_call":
            out.append(entry)
    return out


def _value(payload: dict[str, Any], name: str) -> list[str]:
    field = {"session": "cycle_id", "model": "model_id"}.get(name, name)
    if name == "tag":
        return payload.get("tags") or [""]
    return [payload.get(field) or ""]


def _day(entry: dict[str, Any], zone: dt.tzinfo) -> str:
    return dt.datetime.fromisoformat(entry["ts_utc"]).astimezone(zone).date().isoformat()


def _expected(
    home: Path, zone: dt.tzinfo, first: str, last: str, by: list[str]
) -> dict[tuple[str, ...], int]:
    sums: dict[tuple[str, ...], int] = {}
    for entry in _chain_records(home):
        day = _day(entry, zone)
        if not first <= day <= last:
            continue
        keys: list[tuple[str, ...]] = [(day,)]
        for name in by:
            keys = [(*key, value) for key in keys for value in _value(entry["payload"], name)]
        for key in keys:
            sums[key] = sums.get(key, 0) + entry["payload"]["actual_micros"]
    return sums


def _report(run, home: Path, first: str, last: str, zone: str, by: list[str], fmt: str):
    args = ["--home", str(home), "report", "--from", first, "--to", last, "--tz", zone]
    for name in by:
        args += ["--by", name]
    result = run([*args, "--format", fmt], {"LEDGER_NOW": "2026-03-10T00:00:00Z"})
    assert result.code == 0, result.stderr
    return result.stdout


def _check(run, home: Path, first: str, last: str, zone_name: str, by: list[str]) -> None:
    zone = zoneinfo.ZoneInfo(zone_name)
    doc = json.loads(_report(run, home, first, last, zone_name, by, "json"))
    got = {(row["day"], *(row[name] for name in by)): row["usd_micros"] for row in doc["rows"]}
    expected = _expected(home, zone, first, last, by)
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}
    whole = sum(_expected(home, zone, first, last, []).values())
    assert doc["totals"]["usd_micros"] == whole
    calls = [entry for entry in _chain_records(home) if first <= _day(entry, zone) <= last]
    assert doc["totals"]["calls"] == len(calls)
    # The CSV reads back as the JSON rows: same groups, same exact amounts.
    table = list(csv.DictReader(io.StringIO(_report(run, home, first, last, zone_name, by, "csv"))))
    assert [(r["day"], *(r[n] for n in by)) for r in table] == [
        (row["day"], *(row[n] for n in by)) for row in doc["rows"]
    ]
    for text, row in zip(table, doc["rows"], strict=True):
        assert Decimal(text["usd"]) * 1_000_000 == row["usd_micros"]
        assert len(text["usd"].split(".")[1]) == 6
        assert int(text["calls"]) == row["calls"]
        assert int(text["input_tokens"]) == row["input_tokens"]


@settings(max_examples=12)
@given(
    records=st.lists(record_st, min_size=1, max_size=7),
    zone=st.sampled_from(ZONES),
    by=st.lists(st.sampled_from(DIMENSIONS), unique=True, max_size=2),
    first_offset=st.integers(0, 4),
    span=st.integers(0, 6),
)
def test_report_totals_equal_the_chains_records(
    run_inproc, records, zone, by, first_offset, span
) -> None:
    records = sorted(records, key=lambda item: item["minutes"])
    first = (START.date() + dt.timedelta(days=first_offset)).isoformat()
    last = (START.date() + dt.timedelta(days=first_offset + span)).isoformat()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "1000"]).code == 0
        half = len(records) // 2
        for number, item in enumerate(records):
            if number == half:
                _check(run_inproc, home, first, last, zone, by)  # rollups caught up later
            now = (START + dt.timedelta(minutes=item["minutes"])).isoformat()
            result = run_inproc(["--home", str(home), *_args(item)], {"LEDGER_NOW": now})
            assert result.code == 0, result.stderr
        _check(run_inproc, home, first, last, zone, by)
