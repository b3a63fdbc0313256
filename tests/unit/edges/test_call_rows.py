"""The calls table stores a row as columns and a body of what they do not hold."""

import sqlite3
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.edges.files import callrows
from ledger.edges.files.calltable import SCHEMA, CallTable
from ledger.errors import StateMismatchError

REF = "a" * 64
RECORD = "b" * 64


def _verdict_row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "line": 7, "time": "2026-11-30T08:00:00.000000Z", "verdict_ref": REF, "verdict": "allow",
        "deciding_cap": None, "provider": "anthropic", "model": "claude-sonnet-4-5",
        "agent": "research", "session": "s-1", "key": "team-a", "tags": ["nightly"],
        "client": "claude-code", "estimated_micros": 12000, "actual_micros": 9000,
        "clamped_tokens": None, "uncertainty_reason": None, "record_ref": RECORD,
        "record_time": "2026-11-30T08:00:02.000000Z",
    }  # fmt: skip
    row.update(changes)
    return row


def _table() -> CallTable:
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    return CallTable(db, b"k" * 32)


def test_the_body_holds_neither_nulls_nor_what_the_columns_hold():
    stored, body = callrows.encode(_verdict_row())
    for held in ("agent", "session", "key", "model", "provider", "client", "record_time",
                 "time", "verdict_ref", "actual_micros", "tags", "line", "null"):  # fmt: skip
        assert f'"{held}"' not in body
    assert '"estimated_micros":12000' in body
    assert RECORD in body
    # Some 600 bytes before: every field, nulls and column values too.
    assert len(body) < 160, body
    assert callrows.row_of(stored, body) == _verdict_row()


def test_a_lone_record_names_its_own_ref_by_a_bit():
    row = _verdict_row(verdict=None, record_ref=REF, entry_hash=REF, record_time=None)
    stored, body = callrows.encode(row)
    assert REF not in body
    assert callrows.row_of(stored, body) == row


def test_values_the_columns_cannot_tell_apart_stay_in_the_body():
    # "" and None both read "" in a column; an unsorted tag list reads sorted there.
    row = _verdict_row(agent="", session=None, tags=["b", "a", "a"], line=7, actual_micros=True)
    stored, body = callrows.encode(row)
    assert '"agent":""' in body
    assert '"tags":["b","a","a"]' in body
    assert callrows.row_of(stored, body) == row


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.just(""), st.just(REF),
    st.text(max_size=8), st.lists(st.sampled_from(["a", "b", "", REF]), max_size=3),
)  # fmt: skip


@given(
    fields=st.dictionaries(st.sampled_from(callrows.FIELDS), _VALUES),
    extra=st.dictionaries(st.sampled_from(["kind", "note"]), _VALUES, max_size=1),
    line=st.integers(1, 2**40),
    ref=st.sampled_from([REF, RECORD, "not-a-hash", " ".join(["ab"] * 22)[:64], REF.upper()]),
    time=st.sampled_from(["2026-11-30T08:00:00.000000Z", ""]),
)
def test_any_row_reads_back_as_it_was_written(fields, extra, line, ref, time):
    row = {**fields, **extra, "line": line, "verdict_ref": ref, "time": time}
    table = _table()
    table.put([row])
    assert table.by_ref(ref) == row


def test_an_entry_hash_is_kept_as_its_bytes():
    table = _table()
    table.put([_verdict_row(), _verdict_row(line=8, verdict_ref="loa-17")])
    refs = [found[0] for found in table.db.execute("SELECT ref FROM calls ORDER BY line")]
    assert refs == [bytes.fromhex(REF), "loa-17"]
    assert table.by_ref("loa-17") == _verdict_row(line=8, verdict_ref="loa-17")


def test_an_edited_column_fails_the_mac():
    table = _table()
    table.put([_verdict_row()])
    table.db.execute("UPDATE calls SET agent = 'other'")
    with pytest.raises(StateMismatchError, match="MAC"):
        table.by_ref(REF)


def test_an_unreadable_body_is_a_mismatch_not_a_crash():
    table = _table()
    table.put([_verdict_row()])
    table.db.execute("UPDATE calls SET body = 'not json'")
    with pytest.raises(StateMismatchError, match="cannot be read"):
        table.by_ref(REF)
