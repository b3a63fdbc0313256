"""Verification without the chain lock reads up to the head it was given, never past it.

A writer appending meanwhile may have put part of a line after that head; a
verification bounded by the head never reads it, so it is never taken for a
torn tail (which would seal a false BROKEN finding).
"""

from pathlib import Path

from ledger.runtime import Runtime
from ledger.services.chain.verify import head_bound, verify_store
from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

ENTRIES = 300


def test_a_line_being_appended_after_the_head_is_not_read(home: Path):
    append_entries(home, ENTRIES, clean_env())
    runtime = Runtime(home, clean_env())
    end = head_bound(runtime.chain)
    assert end == (home / "events.jsonl").stat().st_size
    with (home / "events.jsonl").open("ab") as chain:
        chain.write(b'{"schema_version":"1.1.0","primitive_id":"L2","event_ty')  # mid-append
    trust = runtime.keys.load_trust()

    bounded = verify_store(runtime.chain, trust, end=end)
    assert bounded.ok
    assert bounded.entries == ENTRIES

    unbounded = verify_store(runtime.chain, trust)
    assert not unbounded.ok
    assert unbounded.line == ENTRIES + 1


def test_without_a_readable_head_the_whole_chain_is_verified_and_its_damage_reported(home: Path):
    append_entries(home, 10, clean_env())
    with (home / "events.jsonl").open("ab") as chain:
        chain.write(b'{"torn')  # a crash mid-write: under the lock, the head is torn
    runtime = Runtime(home, clean_env())
    assert head_bound(runtime.chain) is None
    outcome = verify_store(runtime.chain, runtime.keys.load_trust(), end=None)
    assert not outcome.ok
    assert outcome.line == 11
