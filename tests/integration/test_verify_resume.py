"""Verification resumes where the newest checkpoint's verification ended (SPEC §21).

``ledger checkpoint`` (and a snapshot) keep a verified mark beside the
checkpoint; the next ``verify-chain``, checkpoint or daemon start-up reads only
the entries after it, unless ``--full`` is given. A mark is believed only while
the prefix's bytes and the trust store are as they were.
"""

import json
from pathlib import Path

from ledger.runtime import Runtime
from ledger.services.chain.verify import (
    head_bound,
    resume_point,
    verify_store,
    write_checkpoint,
)
from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

ENTRIES = 40


def _resume(runtime: Runtime):
    trust = runtime.keys.load_trust()
    return resume_point(runtime.chain, trust, runtime.newest_checkpoint(), runtime.verified_mark())


def _append_more(home: Path, count: int) -> None:
    """Entries after the chain's head, sealed by the product's own writer."""
    from ledger.services.chain.writer import Writer

    runtime = Runtime(home, clean_env())
    writer = Writer(runtime)
    with runtime.chain.transaction() as tx:
        for index in range(count):
            writer.append(
                tx,
                "budget.record_call",
                {
                    "provider": "openai",
                    "actual_micros": 5 + index,
                    "utc_day": "2026-11-22",
                    "verdict_ref": None,
                    "settled": False,
                    "cycle_id": f"more-{index}",
                },
            )


def test_a_checkpoint_keeps_a_mark_and_the_next_verification_starts_there(home: Path):
    append_entries(home, ENTRIES, clean_env())
    runtime = Runtime(home, clean_env())
    written = write_checkpoint(runtime)
    assert written.entries == ENTRIES
    _append_more(home, 3)
    runtime = Runtime(home, clean_env())
    resume = _resume(runtime)
    assert resume is not None
    assert resume.mark.entries == ENTRIES
    trust = runtime.keys.load_trust()
    outcome = verify_store(
        runtime.chain, trust, runtime.newest_checkpoint(), resume=resume,
        end=head_bound(runtime.chain),
    )  # fmt: skip
    assert outcome.ok
    assert outcome.resumed_at == ENTRIES
    assert outcome.entries == ENTRIES + 3
    # The same as a full verification finds.
    full = verify_store(runtime.chain, trust, runtime.newest_checkpoint())
    assert (full.ok, full.entries, full.head_hash) == (True, ENTRIES + 3, outcome.head_hash)


def test_the_next_checkpoint_resumes_and_signs_the_same_tree_root_a_full_pass_gives(
    home: Path,
):
    from ledger.services.chain.streaming import stream_verify

    append_entries(home, ENTRIES, clean_env())
    write_checkpoint(Runtime(home, clean_env()))
    _append_more(home, 5)
    runtime = Runtime(home, clean_env())
    second = write_checkpoint(runtime)
    assert second.entries == ENTRIES + 5
    # The trust store's own writer key signed entries after the first: the root
    # of a pass from line 1 is the one the resumed pass signed.
    whole = stream_verify(runtime.chain, runtime.keys.load_trust())
    assert whole.root_hash == second.checkpoint.root_hash
    assert runtime.verified_mark() is not None
    assert runtime.verified_mark().entries == ENTRIES + 5  # type: ignore[union-attr]


def test_a_byte_edited_inside_the_verified_prefix_sends_verification_back_to_line_1(
    home: Path, run_inproc
):
    append_entries(home, ENTRIES, clean_env())
    assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
    chain = home / "events.jsonl"
    lines = chain.read_bytes().splitlines(keepends=True)
    lines[6] = lines[6].replace(b'"actual_micros":1000', b'"actual_micros":9000')
    chain.write_bytes(b"".join(lines))
    assert _resume(Runtime(home, clean_env())) is None
    result = run_inproc(["--home", str(home), "verify-chain"])
    assert result.code == 1
    assert result.stderr.startswith("BROKEN line 7")


def test_a_changed_trust_store_sends_verification_back_to_line_1(home: Path, run_inproc):
    append_entries(home, ENTRIES, clean_env())
    assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
    trust_file = home / "trust.json"
    document = json.loads(trust_file.read_text())
    document["keys"][0]["valid_from"] = "2026-11-22T08:00:00.010000Z"  # after entry 10
    trust_file.write_text(json.dumps(document))
    result = run_inproc(["--home", str(home), "verify-chain"])
    assert result.code == 1, result.stdout
    assert result.stderr.startswith("BROKEN line 1:")


def test_a_mark_that_no_checkpoint_vouches_for_is_not_used(home: Path, run_inproc):
    append_entries(home, ENTRIES, clean_env())
    assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
    mark_file = home / "state" / "verified-mark.json"
    document = json.loads(mark_file.read_text())
    document["entries"] = ENTRIES - 1  # a mark pointing anywhere but the checkpoint's head
    mark_file.write_text(json.dumps(document))
    assert _resume(Runtime(home, clean_env())) is None
    assert run_inproc(["--home", str(home), "verify-chain"]).stdout == f"OK {ENTRIES} entries\n"


def test_full_reads_every_entry_even_with_a_mark(home: Path, run_inproc):
    append_entries(home, ENTRIES, clean_env())
    assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
    result = run_inproc(["--home", str(home), "verify-chain", "--full", "--json"])
    assert result.code == 0
    assert json.loads(result.stdout) == {
        "ok": True, "entries": ENTRIES, "line": None, "reason": None,
    }  # fmt: skip


def test_jobs_sets_the_processes_of_a_full_verification(home: Path, run_inproc):
    append_entries(home, ENTRIES, clean_env())
    for jobs in ("1", "3"):
        result = run_inproc(["--home", str(home), "verify-chain", "--full", "--jobs", jobs])
        assert (result.code, result.stdout) == (0, f"OK {ENTRIES} entries\n")
    refused = run_inproc(["--home", str(home), "verify-chain", "--jobs", "0"])
    assert refused.code == 2
