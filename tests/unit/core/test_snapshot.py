"""ledger.core snapshot modules: manifests, verification, pruning, recovery plans."""

import dataclasses
import datetime as dt
import gzip
import json

import pytest

from ledger.core.canonical import sha256_hex
from ledger.core.chain_check import check_chain, checkpoint_fits, split_lines
from ledger.core.checkpoint import Checkpoint, make_checkpoint
from ledger.core.events import schema_errors
from ledger.core.recovery import plan_recovery
from ledger.core.snapshot import (
    Manifest,
    SnapshotFileError,
    SnapshotInvalidError,
    document_bytes,
    make_manifest,
    manifest_from_bytes,
    manifest_name_for,
    snapshot_stem,
    snapshots_to_prune,
)
from ledger.core.snapshot_check import VerifiedSnapshot, manifest_signature_problem, verify_snapshot
from ledger.core.timefmt import format_ts
from ledger.edges.schemas import load_schema
from tests.helpers.chains import build_chain, checkpoint_of, entry_hash, lines_of, signer, trust_for

KEY = signer(7)
OTHER = signer(8)
TRUST = trust_for(KEY)
TS = "2026-11-23T04:00:00.000000Z"


def chain(count: int) -> list[bytes]:
    return lines_of(build_chain(count, KEY))


def tamper(line: bytes) -> bytes:
    """Change a payload value without re-signing."""
    return line.replace(b'"actual_micros":100', b'"actual_micros":900', 1)


def snapshot_of(lines: list[bytes], key=KEY) -> tuple[Manifest, bytes, bytes, bytes]:
    """A manifest and its files (compressed chain, raw chain, checkpoint) for ``lines``."""
    raw = b"".join(lines)
    checkpoint = make_checkpoint(key, entry_hash(lines[0]), len(lines), entry_hash(lines[-1]), TS)
    checkpoint_file = document_bytes(checkpoint.to_document())
    gz = gzip.compress(raw, mtime=0)
    stem = snapshot_stem(TS, len(lines))
    manifest = make_manifest(
        key, checkpoint, stem=stem, chain_gz=gz, raw_chain=raw, checkpoint_file=checkpoint_file
    )
    return manifest, gz, raw, checkpoint_file


def verified(lines: list[bytes]) -> VerifiedSnapshot:
    manifest, gz, raw, cp = snapshot_of(lines)
    return verify_snapshot(
        manifest, chain_gz=gz, raw_chain=raw, checkpoint_file=cp, trust=TRUST, source="s"
    )


class TestManifest:
    def test_round_trip_and_signature(self):
        """A manifest survives its file form, and its signature verifies under the trust store."""
        manifest, *_ = snapshot_of(chain(3))
        again = manifest_from_bytes(document_bytes(manifest.to_document()), "m")
        assert again == manifest
        assert manifest_signature_problem(again, TRUST) is None
        assert again.chain_file == snapshot_stem(TS, 3) + ".jsonl.gz"
        assert again.checkpoint_file.endswith(".checkpoint.json")

    def test_any_edit_breaks_the_signature(self):
        """Every signed field is covered: changing one fails verification."""
        manifest, *_ = snapshot_of(chain(3))
        edited = dataclasses.replace(manifest, entries=2)
        assert manifest_signature_problem(edited, TRUST) == "manifest: signature does not verify"

    def test_unknown_key_fails(self):
        """A manifest signed by a key the trust store does not list does not count."""
        manifest, *_ = snapshot_of(chain(3), key=OTHER)
        assert "unknown signing key" in str(manifest_signature_problem(manifest, TRUST))

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            (lambda d: d.update(format="other/1"), "not a ledger-snapshot/1"),
            (lambda d: d.pop("head_hash"), "'head_hash' missing"),
            (lambda d: d.update(chain_file="../events.jsonl"), "not a plain sibling name"),
            (lambda d: d.update(checkpoint_file="/etc/passwd"), "not a plain sibling name"),
            (lambda d: d.update(entries=0), "must be positive"),
            (lambda d: d.update(entries=True), "not an integer"),
            (lambda d: d.update(entries="3"), "not an integer"),
            (lambda d: d.update(chain_sha256="ABC"), "not lowercase SHA-256"),
            (lambda d: d.update(ts_utc="yesterday"), "timestamp"),
            (lambda d: d.update(signature=5), "not a string"),
        ],
    )
    def test_malformed_manifests_are_refused(self, change, message):
        """A manifest that is not exactly ledger-snapshot/1 is bad input data (exit 65)."""
        manifest, *_ = snapshot_of(chain(2))
        document = manifest.to_document()
        change(document)
        with pytest.raises(SnapshotFileError, match=message) as info:
            manifest_from_bytes(json.dumps(document).encode(), "m")
        assert info.value.exit_code == 65

    def test_not_json_is_refused(self):
        """Garbage is bad input data, not a crash."""
        with pytest.raises(SnapshotFileError, match="not valid JSON"):
            manifest_from_bytes(b"\x00\xff", "m")
        with pytest.raises(SnapshotFileError, match="not a JSON object"):
            manifest_from_bytes(b"[1]", "m")

    def test_any_file_of_a_snapshot_leads_to_its_manifest(self):
        """--snapshot accepts the manifest, the compressed chain or the checkpoint."""
        stem = snapshot_stem(TS, 12)
        assert stem == "snapshot-20261123T040000000000Z-000000000012"
        for name in (f"{stem}.jsonl.gz", f"{stem}.checkpoint.json", f"{stem}.manifest.json"):
            assert manifest_name_for(name) == f"{stem}.manifest.json"


class TestVerifySnapshot:
    def test_a_good_snapshot_verifies(self):
        """Signature, hashes, checkpoint and chain all bind together."""
        lines = chain(4)
        snapshot = verified(lines)
        assert snapshot.lines == tuple(lines)
        assert snapshot.checkpoint.entries == 4
        assert snapshot.checkpoint.head_hash == entry_hash(lines[-1])

    @pytest.mark.parametrize(
        ("part", "message"),
        [
            ("gz", "does not hash as the manifest says"),
            ("raw", "decompresses to other bytes"),
            ("checkpoint", "does not hash as the manifest says"),
        ],
    )
    def test_a_changed_file_fails(self, part, message):
        """Each file is bound to the signed manifest by its SHA-256."""
        manifest, gz, raw, cp = snapshot_of(chain(3))
        files = {"gz": gz, "raw": raw, "checkpoint": cp}
        files[part] = files[part] + b" "
        with pytest.raises(SnapshotInvalidError, match=message) as info:
            verify_snapshot(
                manifest,
                chain_gz=files["gz"],
                raw_chain=files["raw"],
                checkpoint_file=files["checkpoint"],
                trust=TRUST,
                source="s",
            )
        assert info.value.exit_code == 1

    def test_a_chain_that_does_not_verify_fails_even_if_resigned(self):
        """A manifest re-signed over a tampered chain still fails: the entries do not verify."""
        lines = chain(3)
        lines[1] = tamper(lines[1])
        manifest, gz, raw, cp = snapshot_of(lines)
        with pytest.raises(SnapshotInvalidError, match="line 2: signature does not verify"):
            verify_snapshot(
                manifest, chain_gz=gz, raw_chain=raw, checkpoint_file=cp, trust=TRUST, source="s"
            )

    def test_a_checkpoint_that_disagrees_with_the_manifest_fails(self):
        """The checkpoint's count must equal the manifest's."""
        lines = chain(3)
        raw = b"".join(lines)
        gz = gzip.compress(raw, mtime=0)
        short = checkpoint_of(lines, KEY, entries=2)
        cp = document_bytes(short.to_document())
        long = make_checkpoint(KEY, entry_hash(lines[0]), 3, entry_hash(lines[-1]), TS)
        manifest = make_manifest(
            KEY, long, stem="s", chain_gz=gz, raw_chain=raw, checkpoint_file=cp
        )
        with pytest.raises(SnapshotInvalidError, match="checkpoint and manifest disagree"):
            verify_snapshot(
                manifest, chain_gz=gz, raw_chain=raw, checkpoint_file=cp, trust=TRUST, source="s"
            )


class TestCheckChain:
    def test_split_lines_splits_on_newline_only(self):
        """Only \\n ends a line (SPEC §2); a torn last line is kept as it is."""
        assert split_lines(b"a\rb\nc\x0bd\ne") == [b"a\rb\n", b"c\x0bd\n", b"e"]
        assert split_lines(b"") == []
        assert split_lines(b"x\n") == [b"x\n"]

    def test_checkpoint_departures_are_failures(self):
        """A chain shorter than its checkpoint fails at the first missing line."""
        lines = chain(5)
        checkpoint = checkpoint_of(lines, KEY)
        assert check_chain(lines, TRUST, checkpoint).ok
        short = check_chain(lines[:3], TRUST, checkpoint)
        assert (short.ok, short.line) == (False, 4)
        assert "truncated" in str(short.reason)
        longer = check_chain(
            [*lines, *lines_of(build_chain(1, KEY, prev_hash=entry_hash(lines[-1])))],
            TRUST,
            checkpoint,
        )
        assert longer.ok
        assert longer.entries == 6

    def test_checkpoint_fits(self):
        """A checkpoint fits a chain that holds its first entry and its head at its count."""
        lines = chain(5)
        assert checkpoint_fits(checkpoint_of(lines, KEY, entries=3), lines, TRUST)
        assert not checkpoint_fits(checkpoint_of(lines, KEY), lines[:4], TRUST)
        assert not checkpoint_fits(checkpoint_of(lines, KEY, entries=3), chain(2), TRUST)
        assert not checkpoint_fits(checkpoint_of(lines, OTHER, entries=3), lines, TRUST)
        assert not checkpoint_fits(checkpoint_of(lines, KEY, entries=3), [], TRUST)


class TestPrune:
    NOW = dt.datetime(2026, 12, 31, 4, 0, tzinfo=dt.UTC)

    def at(self, days_ago: float) -> str:
        return format_ts(self.NOW - dt.timedelta(days=days_ago))

    def test_older_than_keep_days_are_pruned(self):
        """Age is the checkpoint's time against now; exactly keep_days old is kept."""
        snapshots = [("a", self.at(40), 1), ("b", self.at(30), 2), ("c", self.at(1), 3)]
        assert snapshots_to_prune(snapshots, self.NOW, 30, keep="c") == ["a"]

    def test_the_newest_is_never_pruned(self):
        """Even with keep_days 0 and every snapshot old, the newest stays."""
        snapshots = [("a", self.at(40), 1), ("b", self.at(35), 2)]
        assert snapshots_to_prune(snapshots, self.NOW, 0, keep="x") == ["a"]
        assert snapshots_to_prune(snapshots, self.NOW, 0, keep="a") == []
        assert snapshots_to_prune([], self.NOW, 0, keep="x") == []


class TestPlanRecovery:
    def test_torn_tail_without_snapshot(self):
        """The torn last line is the only loss."""
        lines = chain(4)
        damaged = [*lines, b'{"schema_version":"1.1']
        plan = plan_recovery(damaged, TRUST)
        assert plan.lines == tuple(lines)
        assert (plan.entries, plan.lost_lines, plan.first_lost_line) == (4, 1, 5)
        assert plan.reason == "torn line (no newline at end of file)"
        assert plan.head_hash == entry_hash(lines[-1])
        assert plan.genesis_hash == entry_hash(lines[0])

    def test_edited_middle_without_snapshot_keeps_the_prefix(self):
        """Without a snapshot, everything from the first bad line is lost."""
        lines = chain(6)
        lines[2] = tamper(lines[2])
        plan = plan_recovery(lines, TRUST)
        assert (plan.entries, plan.lost_lines, plan.first_lost_line) == (2, 4, 3)
        assert plan.reason == "signature does not verify"
        assert plan.base_entries == 0

    def test_snapshot_repairs_an_edit_before_its_head(self):
        """The snapshot's original replaces the edited line; the tail after it still chains."""
        original = chain(8)
        damaged = list(original)
        damaged[2] = tamper(damaged[2])
        plan = plan_recovery(damaged, TRUST, verified(original[:5]))
        assert plan.lines == tuple(original)
        assert (plan.entries, plan.base_entries) == (8, 5)
        assert (plan.lost_lines, plan.first_lost_line) == (1, 3)
        assert plan.reason == "signature does not verify"

    def test_edit_after_the_snapshot_loses_the_rest(self):
        """Entries after an edited one no longer chain: they are lost (kept as evidence)."""
        original = chain(9)
        damaged = list(original)
        damaged[6] = tamper(damaged[6])
        plan = plan_recovery(damaged, TRUST, verified(original[:5]))
        assert plan.lines == tuple(original[:6])
        assert (plan.lost_lines, plan.first_lost_line) == (3, 7)
        assert plan.reason == "signature does not verify"

    def test_an_edited_snapshot_head_still_links_the_tail(self):
        """The line after the snapshot's head links to the head's hash, not to the edited line."""
        original = chain(7)
        damaged = list(original)
        damaged[4] = tamper(damaged[4])
        plan = plan_recovery(damaged, TRUST, verified(original[:5]))
        assert plan.lines == tuple(original)
        assert (plan.lost_lines, plan.first_lost_line) == (1, 5)

    def test_a_deleted_line_before_the_head_shifts_nothing(self):
        """A missing line is restored from the snapshot; the tail is found by its link."""
        original = chain(8)
        damaged = original[:2] + original[3:]
        plan = plan_recovery(damaged, TRUST, verified(original[:5]))
        assert plan.lines == tuple(original)
        assert plan.lost_lines == 0
        assert plan.damaged.line == 3

    def test_truncated_below_the_snapshot(self):
        """A file cut short of the snapshot is restored to the snapshot, nothing of it lost."""
        original = chain(8)
        plan = plan_recovery(original[:3], TRUST, verified(original[:5]))
        assert plan.lines == tuple(original[:5])
        assert (plan.lost_lines, plan.first_lost_line, plan.reason) == (0, None, None)

    def test_missing_file_with_snapshot(self):
        """No damaged lines at all: the snapshot alone."""
        original = chain(3)
        plan = plan_recovery([], TRUST, verified(original))
        assert plan.lines == tuple(original)
        assert (plan.damaged_lines, plan.lost_lines) == (0, 0)

    def test_a_snapshot_of_another_chain_keeps_none_of_the_file(self):
        """Lines that are neither in the snapshot nor linked to its head are lost."""
        other = lines_of(build_chain(3, KEY, first_index=100))
        plan = plan_recovery(chain(4), TRUST, verified(other))
        assert plan.lines == tuple(other)
        assert (plan.lost_lines, plan.first_lost_line) == (4, 1)
        assert "not part of the restored chain" in str(plan.reason)

    def test_an_impossible_time_fails_the_line_instead_of_crashing(self):
        """A ts_utc of the right shape but no calendar time (month 13) is a lost line."""
        lines = chain(4)
        lines[2] = lines[2].replace(b'"ts_utc":"2026-11-', b'"ts_utc":"2026-13-', 1)
        plan = plan_recovery(lines, TRUST)
        assert (plan.entries, plan.first_lost_line) == (2, 3)
        assert str(plan.reason).startswith("malformed entry")
        check = check_chain(lines, TRUST)
        assert (check.ok, check.line) == (False, 3)

    def test_nothing_verifies(self):
        """A file whose first line is garbage restores nothing."""
        plan = plan_recovery([b"garbage\n", *chain(2)], TRUST)
        assert (plan.entries, plan.lost_lines, plan.first_lost_line) == (0, 3, 1)
        assert plan.head_hash is None
        assert plan.genesis_hash is None


class TestSchemas:
    def test_snapshot_payload_schema(self):
        """The ledger.snapshot payload the service writes validates; extra fields do not."""
        schema = load_schema("ledger.snapshot")
        payload = {
            "path": f"snapshots/{snapshot_stem(TS, 3)}.manifest.json",
            "sha256": "a" * 64,
            "entries": 3,
            "head_hash": "b" * 64,
            "chain_id": "c" * 64,
            "chain_sha256": sha256_hex(b""),
            "pruned": [],
        }
        assert schema_errors(payload, schema) is None
        assert schema_errors({**payload, "extra": 1}, schema) is not None
        assert schema_errors({**payload, "entries": 0}, schema) is not None

    def test_recovered_payload_schema(self):
        """The ledger.recovered payload allows nulls where nothing was lost or used."""
        schema = load_schema("ledger.recovered")
        payload = {
            "damage": "events.jsonl is missing",
            "damaged_lines": 0,
            "restored_entries": 0,
            "snapshot_entries": 0,
            "lost_lines": 0,
            "first_lost_line": None,
            "reason": None,
            "snapshot": None,
            "evidence": None,
            "head_hash": None,
            "checkpoint_entries": None,
            "checkpoints_retired": [],
        }
        assert schema_errors(payload, schema) is None
        assert schema_errors({**payload, "first_lost_line": 0}, schema) is not None
        assert schema_errors({**payload, "lost_lines": 1.5}, schema) is not None


def test_checkpoint_is_stored_as_in_checkpoints_dir():
    """The snapshot's checkpoint copy is byte-identical to the checkpoints/ file format."""
    from ledger.core.canonical import canonical_bytes

    checkpoint: Checkpoint = checkpoint_of(chain(2), KEY)
    assert (
        document_bytes(checkpoint.to_document())
        == canonical_bytes(checkpoint.to_document()) + b"\n"
    )
