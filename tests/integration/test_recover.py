"""``ledger recover`` on real homes, one test per kind of damage."""

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.core.envelope import parse_line
from ledger.edges.files.snapshotfiles import SnapshotFiles
from ledger.errors import TornTailError
from ledger.runtime import Runtime
from ledger.services.chain import recover as recover_module
from ledger.services.chain import recover_verifying
from ledger.services.chain.writer import Writer
from tests.conftest import clean_env, run_process

PAYLOAD = {
    "provider": "openai",
    "actual_micros": 1000,
    "utc_day": "2026-11-22",
    "verdict_ref": None,
    "settled": False,
}
NOW = "2031-05-01T12:00:00Z"
# Fields of the report that differ between --dry-run and the real run.
RUN_ONLY = {"dry_run", "message", "state_cleared", "entry_hash", "resealed_hashes"}


def add(home: Path, count: int) -> None:
    """Append ``count`` budget.record_call entries through the real writer."""
    writer = Writer(Runtime(home, environ={}))
    for _ in range(count):
        writer.append_one("budget.record_call", PAYLOAD)


def chain_path(home: Path) -> Path:
    return home / "events.jsonl"


def chain_lines(home: Path) -> list[bytes]:
    return chain_path(home).read_bytes().splitlines(keepends=True)


def tamper(line: bytes) -> bytes:
    edited = line.replace(b'"actual_micros":1000', b'"actual_micros":1', 1)
    assert edited != line
    return edited


def write_lines(home: Path, lines: list[bytes]) -> bytes:
    data = b"".join(lines)
    chain_path(home).write_bytes(data)
    return data


def tree(home: Path) -> dict[str, bytes]:
    """Every file under the home with its bytes (to prove nothing changed)."""
    return {
        str(path.relative_to(home)): path.read_bytes()
        for path in sorted(home.rglob("*"))
        if path.is_file()
    }


def cli(run_inproc, home: Path, *args: str, now: str | None = NOW):
    return run_inproc(["--home", str(home), *args], env={"LEDGER_NOW": now} if now else {})


def recover(run_inproc, home: Path, *args: str) -> dict[str, Any]:
    result = cli(run_inproc, home, "recover", *args)
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    report: dict[str, Any] = result.json()
    return report


def verify_ok(run_inproc, home: Path) -> int:
    result = cli(run_inproc, home, "verify-chain", now=None)
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("OK ")
    return int(result.stdout.split()[1])


def take_snapshot(run_inproc, home: Path) -> str:
    """Snapshot and return the manifest's path relative to the home."""
    result = cli(run_inproc, home, "snapshot", now=None)
    assert result.code == 0, result.stderr
    return str(Path(result.json()["path"]).relative_to(home))


def with_snapshot(
    run_inproc, home: Path, before: int = 5, after: int = 3
) -> tuple[list[bytes], str]:
    """``before`` entries, a snapshot of them (+1 ledger.snapshot entry), ``after`` more."""
    add(home, before)
    snap = take_snapshot(run_inproc, home)
    add(home, after)
    lines = chain_lines(home)
    assert len(lines) == before + 1 + after
    return lines, snap


def recover_checked(run_inproc, home: Path, damaged: bytes | None) -> dict[str, Any]:
    """Dry run (nothing changes), then the real run; the two reports agree."""
    before = tree(home)
    dry = recover(run_inproc, home, "--dry-run")
    assert dry["dry_run"] is True
    assert dry["action"] == "recover"
    assert tree(home) == before, "--dry-run changed the home"
    report = recover(run_inproc, home)
    assert report["dry_run"] is False
    assert {k: v for k, v in dry.items() if k not in RUN_ONLY} == {
        k: v for k, v in report.items() if k not in RUN_ONLY
    }
    if damaged is None:
        assert report["evidence"] is None
    else:
        assert (home / report["evidence"]).read_bytes() == damaged
    recorded = parse_line(chain_lines(home)[-1].rstrip(b"\n"))
    assert recorded.event_type == "ledger.recovered"
    assert recorded.entry_hash == report["entry_hash"]
    assert recorded.payload == {key: report[key] for key in recorded.payload}
    carried = len(report["resealed"])
    assert len(report["resealed_hashes"]) == carried
    assert len(chain_lines(home)) == report["restored_entries"] + carried + 1
    assert verify_ok(run_inproc, home) == report["restored_entries"] + carried + 1
    return report


def test_a_valid_chain_is_left_alone(home, run_inproc):
    """Exit 0, a report saying so, and not one byte of the home changed."""
    with_snapshot(run_inproc, home, 2, 2)
    before = tree(home)
    for args in ((), ("--dry-run",)):
        report = recover(run_inproc, home, *args)
        assert report["action"] == "none"
        assert "left alone" in report["message"]
        assert (report["restored_entries"], report["lost_lines"]) == (5, 0)
        assert report["evidence"] is None
    assert tree(home) == before


def test_a_home_without_any_chain_needs_nothing(home, run_inproc):
    """No chain, no snapshot, no checkpoint: nothing to recover, nothing created."""
    before = tree(home)
    report = recover(run_inproc, home)
    assert report["action"] == "none"
    assert "nothing to recover" in report["message"]
    assert tree(home) == before


def test_torn_tail(home, run_inproc):
    """The cut line is dropped (and kept as evidence); every whole entry survives."""
    add(home, 4)
    with chain_path(home).open("ab") as handle:
        handle.write(b'{"schema_version":"1.1.0","primitive_id":"L2","event_')
    damaged = chain_path(home).read_bytes()
    with pytest.raises(TornTailError):
        add(home, 1)
    report = recover_checked(run_inproc, home, damaged)
    assert report["restored_entries"] == 4
    assert report["snapshot"] is None
    assert (report["damaged_lines"], report["lost_lines"], report["first_lost_line"]) == (5, 1, 5)
    assert report["reason"] == "torn line (no newline at end of file)"
    assert report["damage"] == "BROKEN line 5: torn line (no newline at end of file)"
    assert report["evidence"].startswith("evidence/events.jsonl.damaged-20310501T120000")
    assert chain_path(home).read_bytes().startswith(damaged[: damaged.rindex(b"\n") + 1])
    add(home, 1)  # appending works again
    assert verify_ok(run_inproc, home) == 6


def test_edited_entry_before_the_snapshot_point(home, run_inproc):
    """The snapshot's original replaces the edited line; every entry survives."""
    original, snap = with_snapshot(run_inproc, home)
    damaged_lines = list(original)
    damaged_lines[2] = tamper(damaged_lines[2])
    damaged = write_lines(home, damaged_lines)
    report = recover_checked(run_inproc, home, damaged)
    assert report["snapshot"] == snap
    assert (report["restored_entries"], report["snapshot_entries"]) == (9, 5)
    assert (report["lost_lines"], report["first_lost_line"]) == (1, 3)
    assert report["reason"] == "signature does not verify"
    assert report["damage"] == "BROKEN line 3: signature does not verify"
    assert chain_lines(home)[:9] == original


def test_edited_entry_after_the_snapshot_point(home, run_inproc):
    """Entries after the edit no longer chain: lost, and a checkpoint vouching for them retired."""
    original, snap = with_snapshot(run_inproc, home)
    assert cli(run_inproc, home, "checkpoint", now=None).code == 0  # vouches for 9 entries
    damaged_lines = list(original)
    damaged_lines[7] = tamper(damaged_lines[7])
    damaged = write_lines(home, damaged_lines)
    report = recover_checked(run_inproc, home, damaged)
    assert report["snapshot"] == snap
    assert (report["restored_entries"], report["snapshot_entries"]) == (7, 5)
    assert (report["lost_lines"], report["first_lost_line"]) == (2, 8)
    assert report["reason"] == "signature does not verify"
    assert report["checkpoint_entries"] == 9
    assert len(report["checkpoints_retired"]) == 1
    retired = home / report["checkpoints_retired"][0]
    assert json.loads(retired.read_bytes())["entries"] == 9
    assert chain_lines(home)[:7] == original[:7]
    # Both records after the damage are sealed again: the edited one (its
    # signature fails) counted fail-closed, the honest one as it was.
    assert [
        (item["line"], item["verified"], item["actual_micros"]) for item in report["resealed"]
    ] == [
        (8, False, 1),
        (9, True, 1000),
    ]
    # The recovered chain can be snapshotted again.
    take_snapshot(run_inproc, home)
    assert verify_ok(run_inproc, home) == 11


def test_deleted_file(home, run_inproc):
    """events.jsonl gone: the newest snapshot is restored."""
    original, snap = with_snapshot(run_inproc, home)
    chain_path(home).unlink()
    report = recover_checked(run_inproc, home, None)
    assert report["snapshot"] == snap
    assert report["damage"] == "events.jsonl is missing"
    assert (report["restored_entries"], report["snapshot_entries"]) == (5, 5)
    assert (report["damaged_lines"], report["lost_lines"], report["first_lost_line"]) == (
        0,
        0,
        None,
    )
    assert report["checkpoint_entries"] == 5
    assert chain_lines(home)[:5] == original[:5]


def test_truncated_file_with_a_snapshot(home, run_inproc):
    """Cut below the snapshot point: the snapshot restores what the file lost."""
    original, snap = with_snapshot(run_inproc, home)
    damaged = write_lines(home, original[:3])
    report = recover_checked(run_inproc, home, damaged)
    assert report["snapshot"] == snap
    assert (report["restored_entries"], report["lost_lines"]) == (5, 0)
    assert "BROKEN line 4: entry missing" in report["damage"]
    assert chain_lines(home)[:5] == original[:5]


def test_truncated_mid_line_after_the_snapshot(home, run_inproc):
    """Snapshot plus whatever remains after it; the cut line is the one loss."""
    original, snap = with_snapshot(run_inproc, home)
    damaged = write_lines(home, [*original[:7], original[7][:40]])
    report = recover_checked(run_inproc, home, damaged)
    assert report["snapshot"] == snap
    assert (report["restored_entries"], report["snapshot_entries"]) == (7, 5)
    assert (report["lost_lines"], report["first_lost_line"]) == (1, 8)
    assert chain_lines(home)[:7] == original[:7]


def test_no_snapshot_at_all(home, run_inproc):
    """Without a snapshot the longest verifying prefix of the damaged file survives."""
    add(home, 6)
    original = chain_lines(home)
    damaged_lines = list(original)
    damaged_lines[3] = tamper(damaged_lines[3])
    damaged = write_lines(home, damaged_lines)
    report = recover_checked(run_inproc, home, damaged)
    assert report["snapshot"] is None
    assert report["snapshot_entries"] == 0
    assert (report["restored_entries"], report["lost_lines"], report["first_lost_line"]) == (
        3,
        3,
        4,
    )
    assert chain_lines(home)[:3] == original[:3]


def test_an_edited_line_loses_none_of_the_honest_spend_after_it(home, run_inproc):
    """Five honest records after an edited verdict: their spend counts after recover."""
    for _number in range(3):
        assert cli(run_inproc, home, "record", "0.5", "--provider", "openai").code == 0
    ref = cli(run_inproc, home, "verdict", "1").json()["verdict_ref"]
    for number in range(5):
        key = f"after-{number}"
        args = ("record", "0.25", "--provider", "openai", "--idempotency-key", key)
        assert cli(run_inproc, home, *args, "--verdict-ref", ref).code == 0
    before = cli(run_inproc, home, "usage").json()
    assert before["usd_used_micros"] == 2_750_000
    lines = chain_lines(home)
    edited = next(i for i, line in enumerate(lines) if b"budget.allow" in line)
    lines[edited] = lines[edited].replace(b'"estimated_micros":1000000', b'"estimated_micros":1', 1)
    write_lines(home, lines)
    report = recover_checked(run_inproc, home, b"".join(lines))
    assert report["first_lost_line"] == edited + 1
    assert [item["verified"] for item in report["resealed"]] == [True] * 5
    assert report["resealed"][0]["line"] == edited + 2
    after = cli(run_inproc, home, "usage").json()
    assert after["uncertainty_reason"] is None
    assert after["usd_used_micros"] == before["usd_used_micros"]
    # Each carried record keeps its idempotency key: a retry still counts once.
    again = cli(run_inproc, home, "record", "0.25", "--provider", "openai",
                "--idempotency-key", "after-0")  # fmt: skip
    assert again.json()["duplicate"] is True
    assert cli(run_inproc, home, "usage").json()["usd_used_micros"] == 2_750_000


def test_an_edited_record_is_still_counted_until_a_forced_reconcile(home, run_inproc):
    """A record whose signature no longer verifies is kept as evidence and counted."""
    for _number in range(4):
        assert cli(run_inproc, home, "record", "0.5", "--provider", "openai").code == 0
    lines = chain_lines(home)
    lines[1] = lines[1].replace(b'"provider":"openai"', b'"provider":"anthropic"', 1)
    write_lines(home, lines)
    report = recover_checked(run_inproc, home, b"".join(lines))
    assert [(item["line"], item["verified"]) for item in report["resealed"]] == [
        (2, False),
        (3, True),
        (4, True),
    ]
    assert "counted until `ledger reconcile --force-reason`" in report["message"]
    assert cli(run_inproc, home, "usage").json()["usd_used_micros"] == 2_000_000


def test_the_snapshot_option_chooses_an_older_snapshot(home, run_inproc):
    """--snapshot F (any of its files) restores from F, not the newest."""
    add(home, 3)
    older = take_snapshot(run_inproc, home)
    add(home, 3)
    take_snapshot(run_inproc, home)
    original = chain_lines(home)
    damaged_lines = list(original)
    damaged_lines[1] = tamper(damaged_lines[1])
    write_lines(home, damaged_lines)
    given = home / older.replace(".manifest.json", ".jsonl.gz")
    report = recover(run_inproc, home, "--snapshot", str(given))
    assert report["snapshot"] == older
    assert (report["snapshot_entries"], report["restored_entries"]) == (3, len(original))
    assert verify_ok(run_inproc, home) == len(original) + 1


def test_a_newest_snapshot_that_does_not_verify_is_skipped(home, run_inproc):
    """The newest snapshot that verifies is used; the report says why others were not."""
    add(home, 3)
    older = take_snapshot(run_inproc, home)
    add(home, 2)
    newest = take_snapshot(run_inproc, home)
    gz = home / newest.replace(".manifest.json", ".jsonl.gz")
    gz.write_bytes(gz.read_bytes()[:-8] + b"\0" * 8)
    damaged_lines = chain_lines(home)
    damaged_lines[0] = tamper(damaged_lines[0])
    write_lines(home, damaged_lines)
    report = recover(run_inproc, home)
    assert report["snapshot"] == older
    assert [item["snapshot"] for item in report["snapshots_rejected"]] == [newest]
    assert verify_ok(run_inproc, home) == report["restored_entries"] + 1


@pytest.mark.parametrize(
    ("make", "code", "message"),
    [
        (lambda home, _snap: home / "no-such.manifest.json", 65, "ledger: cannot read snapshot"),
        (lambda home, _snap: _write(home / "bad.manifest.json", b"{"), 65, "is not valid JSON"),
        (lambda home, snap: _forge(home / snap), 1, "signature does not verify"),
    ],
)
def test_a_bad_snapshot_option_changes_nothing(home, run_inproc, make, code, message):
    """Unreadable or malformed --snapshot: exit 65; one that does not verify: exit 1."""
    original, snap = with_snapshot(run_inproc, home, 2, 1)
    write_lines(home, [*original, b"torn"])
    given = make(home, snap)
    before = tree(home)
    result = cli(run_inproc, home, "recover", "--snapshot", str(given))
    assert result.code == code
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert message in result.stderr
    assert tree(home) == before


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _forge(path: Path) -> Path:
    document = json.loads(path.read_bytes())
    document["ts_utc"] = "2020-01-01T00:00:00.000000Z"
    path.write_text(json.dumps(document))
    return path


def test_derived_state_is_deleted(home, run_inproc):
    """Derived state is rebuilt from the verified chain, so recovery removes it."""
    add(home, 3)
    state = home / "state"
    state.mkdir(exist_ok=True)
    (state / "derived.json").write_text("{}")
    write_lines(home, [*chain_lines(home), b"torn"])
    report = recover(run_inproc, home)
    assert report["state_cleared"] == ["state/derived.json"]
    assert not (state / "derived.json").exists()


def test_evidence_is_never_overwritten(home, run_inproc):
    """Two recoveries at the same instant keep both damaged files."""
    add(home, 3)
    first_damage = write_lines(home, [*chain_lines(home), b"torn one"])
    first = recover(run_inproc, home)
    second_damage = write_lines(home, [*chain_lines(home), b"torn two"])
    second = recover(run_inproc, home)
    assert second["evidence"] == first["evidence"] + "-2"
    assert (home / first["evidence"]).read_bytes() == first_damage
    assert (home / second["evidence"]).read_bytes() == second_damage
    assert verify_ok(run_inproc, home) == 5


def test_recover_in_a_real_process(home):
    """`python -m ledger recover` repairs a torn tail and exits 0."""
    add(home, 2)
    write_lines(home, [*chain_lines(home), b"{"])
    result = run_process(["--home", str(home), "recover"], env=clean_env())
    assert result.code == 0, result.stderr
    assert result.json()["restored_entries"] == 2
    check = run_process(["--home", str(home), "verify-chain"], env=clean_env())
    assert (check.code, check.stdout) == (0, "OK 3 entries\n")


class TestAChainThatVerifiesIsStreamed:
    """A verifying chain is read as ``verify-chain`` reads it, the lock held only at its end.

    On a year-old home, reading the whole chain into memory under the lock
    took gigabytes and refused every verdict meanwhile (SPEC §21).
    """

    def test_it_is_never_read_whole(self, home, run_inproc, monkeypatch):
        with_snapshot(run_inproc, home, 3, 3)

        def whole(self: SnapshotFiles) -> bytes:
            raise AssertionError("recover read the whole chain")

        monkeypatch.setattr(SnapshotFiles, "read_chain", whole)
        for args in ((), ("--dry-run",)):
            report = recover(run_inproc, home, *args)
            assert report["action"] == "none"
            assert (report["restored_entries"], report["damaged_lines"]) == (7, 7)

    def test_an_edit_after_the_unlocked_read_is_caught_under_the_lock(
        self, home, run_inproc, monkeypatch
    ):
        lines, _snap = with_snapshot(run_inproc, home, 5, 3)
        unlocked = recover_verifying.verify_unlocked

        def then_edited(*args: Any, **options: Any) -> Any:
            read = unlocked(*args, **options)
            assert read is not None, "the chain verified before the edit"
            write_lines(home, [*lines[:6], tamper(lines[6]), *lines[7:]])
            return read

        monkeypatch.setattr(recover_module, "verify_unlocked", then_edited)
        report = recover(run_inproc, home)
        assert report["action"] == "recover"
        assert report["first_lost_line"] == 7
        assert verify_ok(run_inproc, home) == len(chain_lines(home))
