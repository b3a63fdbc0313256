"""``ledger verify-chain`` as SPEC §3 states it: output, exit codes, what it detects."""

import json
import os
from pathlib import Path

import pytest

from ledger.core.canonical import canonical_bytes
from ledger.core.trust import Revocation, TrustedKey, TrustStore, trust_document
from ledger.edges.fileio import ByIdentity
from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.chainverify import _PARALLEL_MIN_BYTES, byte_ranges
from ledger.errors import EXIT_DATA
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer
from tests.helpers.chains import (
    build_chain,
    checkpoint_of,
    entry_hash,
    foreign_line,
    lines_of,
    moment,
    record_payload,
    signer,
    trust_for,
    write_lines,
    write_public_pem,
)

KEY = signer(11)
OTHER = signer(12)
COUNT = 10
LINES = lines_of(build_chain(COUNT, KEY))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A valid 10-entry log, its key as PEM, another key, and a place for more files."""
    return {
        "log": write_lines(tmp_path / "log.jsonl", LINES),
        "pem": write_public_pem(tmp_path / "key.pub.pem", KEY),
        "other": write_public_pem(tmp_path / "other.pub.pem", OTHER),
        "dir": tmp_path,
    }


@pytest.fixture
def verify(run_inproc, tmp_path: Path):
    """Run ``ledger --home <empty> verify-chain ARGS``."""

    def run(*args: str | Path):
        return run_inproc(["--home", str(tmp_path / "no-home"), "verify-chain", *map(str, args)])

    return run


def _broken(result, line: int, reason: str | None = None) -> None:
    assert result.code == 1, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"BROKEN line {line}: "), result.stderr
    if reason is not None:
        assert reason in lines[0], result.stderr


def _ok(result, entries: int) -> None:
    assert (result.code, result.stdout, result.stderr) == (0, f"OK {entries} entries\n", "")


def _one_error_line(result, code: int) -> None:
    assert result.code == code, result
    lines = result.stderr.splitlines()
    assert lines, result
    assert lines[-1].startswith("ledger: "), result.stderr
    assert "Traceback" not in result.stderr


def _trust_file(path: Path, store: TrustStore) -> Path:
    path.write_bytes(canonical_bytes(trust_document(store)) + b"\n")
    return path


def _append(home: Path, count: int, first: int = 0) -> list[str]:
    writer = Writer(Runtime(home))
    return [
        writer.append_one("budget.record_call", record_payload(first + i)).entry_hash
        for i in range(count)
    ]


def _keep_lines(path: Path, count: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:count]))


class TestOutput:
    def test_ok(self, verify, files):
        """A valid log prints `OK <N> entries` on stdout and exits 0."""
        _ok(verify(files["log"], "--key", files["pem"]), COUNT)

    def test_key_with_id(self, verify, files):
        """--key ID=PEM trusts the key for that signing_key_id."""
        _ok(verify(files["log"], "--key", f"{KEY.key_id}={files['pem']}"), COUNT)

    def test_key_with_wrong_id(self, verify, files):
        """--key ID=PEM for another id does not vouch for this key's entries."""
        _broken(verify(files["log"], "--key", f"someone={files['pem']}"), 1, "unknown signing key")

    def test_no_key(self, verify, files):
        """With LOG and no key, signed entries have an unknown key: BROKEN line 1."""
        _broken(verify(files["log"]), 1, f"unknown signing key {KEY.key_id}")

    def test_wrong_key(self, verify, files):
        """A key that did not sign the entries fails the signature at line 1."""
        _broken(verify(files["log"], "--key", files["other"]), 1, "signature does not verify")

    def test_json_ok(self, verify, files):
        """--json prints exactly {ok, entries, line, reason} and exits 0."""
        result = verify(files["log"], "--key", files["pem"], "--json")
        assert result.code == 0
        assert json.loads(result.stdout) == {
            "ok": True,
            "entries": COUNT,
            "line": None,
            "reason": None,
        }
        assert result.stdout.count("\n") == 1

    def test_json_broken(self, verify, files):
        """--json on a broken log gives ok false, the line and the reason; exit 1."""
        write_lines(files["log"], [*LINES[:3], *LINES[4:]])
        result = verify(files["log"], "--key", files["pem"], "--json")
        assert result.code == 1
        document = json.loads(result.stdout)
        assert set(document) == {"ok", "entries", "line", "reason"}
        assert document["ok"] is False
        assert document["line"] == 4
        assert document["entries"] == 3
        assert document["reason"] == "prev_hash does not match the previous entry"

    def test_missing_log_exits_2(self, verify, files):
        """A LOG that does not exist is a bad command line: exit 2."""
        _one_error_line(verify(files["dir"] / "nope.jsonl", "--key", files["pem"]), 2)

    def test_home_without_entries_yet_is_ok_0_entries(self, run_inproc, home):
        """Without LOG, a home with no entries yet verifies: nothing was lost."""
        _ok(run_inproc(["--home", str(home), "verify-chain"]), 0)

    @pytest.mark.parametrize(
        "option",
        ["--key", "--trust-store", "--checkpoint"],
    )
    @pytest.mark.parametrize("problem", ["missing", "directory", "garbage"])
    def test_unreadable_input_file_exits_65(self, verify, files, option, problem):
        """An unreadable or malformed --key, --trust-store or --checkpoint file exits 65."""
        target = files["dir"] / f"input-{problem}"
        if problem == "directory":
            target.mkdir()
        elif problem == "garbage":
            target.write_bytes(b"\x00garbage{")
        extra = ["--key", files["pem"]] if option != "--key" else []
        result = verify(files["log"], option, target, *extra)
        _one_error_line(result, EXIT_DATA)
        assert len(result.stderr.splitlines()) == 1

    def test_malformed_trust_store_exits_65(self, verify, files):
        """A trust store that is JSON but not a trust document exits 65."""
        bad = files["dir"] / "trust.json"
        bad.write_text('{"format": "something-else"}')
        _one_error_line(verify(files["log"], "--trust-store", bad), EXIT_DATA)

    def test_home_chain_defaults(self, run_inproc, home):
        """Without LOG the home's chain and trust store are used."""
        _append(home, 3)
        _ok(run_inproc(["--home", str(home), "verify-chain"]), 3)


class TestDetection:
    def test_edited_byte(self, verify, files):
        """One changed byte in line 6's payload: BROKEN line 6 (signature)."""
        lines = list(LINES)
        lines[5] = lines[5].replace(b"openai", b"openaj", 1)
        write_lines(files["log"], lines)
        _broken(verify(files["log"], "--key", files["pem"]), 6, "signature does not verify")

    def test_deleted_entry(self, verify, files):
        """Deleting line 4 breaks the link at line 4."""
        write_lines(files["log"], [*LINES[:3], *LINES[4:]])
        _broken(verify(files["log"], "--key", files["pem"]), 4, "prev_hash does not match")

    def test_inserted_entry(self, verify, files):
        """Duplicating line 5 after itself breaks the link at line 6."""
        write_lines(files["log"], [*LINES[:5], LINES[4], *LINES[5:]])
        _broken(verify(files["log"], "--key", files["pem"]), 6, "prev_hash does not match")

    def test_reordered_entries(self, verify, files):
        """Swapping lines 3 and 7 is reported at line 3."""
        lines = list(LINES)
        lines[2], lines[6] = lines[6], lines[2]
        write_lines(files["log"], lines)
        _broken(verify(files["log"], "--key", files["pem"]), 3, "prev_hash does not match")

    def test_torn_line(self, verify, files):
        """A last line cut short (no newline) is reported as torn."""
        write_lines(files["log"], [*LINES[:7], LINES[7][:50]])
        _broken(verify(files["log"], "--key", files["pem"]), 8, "torn line")

    def test_torn_line_of_full_length(self, verify, files):
        """A complete last entry missing only its newline is still torn."""
        write_lines(files["log"], [*LINES[:7], LINES[7][:-1]])
        _broken(verify(files["log"], "--key", files["pem"]), 8, "torn line")

    def test_non_json_line(self, verify, files):
        """A line that is not JSON is reported at its line."""
        write_lines(files["log"], [*LINES[:2], b"this is not json\n", *LINES[2:]])
        _broken(verify(files["log"], "--key", files["pem"]), 3, "malformed entry")

    def test_marker_line_without_allow_markers(self, verify, files):
        """A marker line is BROKEN unless --allow-markers is given."""
        write_lines(files["log"], [*LINES[:4], b"[2026-11-22] rotated logs\n", *LINES[4:]])
        _broken(verify(files["log"], "--key", files["pem"]), 5, "marker")

    def test_marker_lines_skipped_with_allow_markers(self, verify, files):
        """With --allow-markers markers are skipped and not counted."""
        write_lines(files["log"], [b"[begin]\n", *LINES[:4], b"[middle]\n", *LINES[4:], b"[end]\n"])
        _ok(verify(files["log"], "--key", files["pem"], "--allow-markers"), COUNT)

    def test_marker_does_not_shift_later_line_numbers(self, verify, files):
        """Line numbers count every line, markers included."""
        lines = [b"[begin]\n", *LINES]
        lines[6] = lines[6].replace(b"openai", b"openaj", 1)
        write_lines(files["log"], lines)
        _broken(verify(files["log"], "--key", files["pem"], "--allow-markers"), 7, "signature")

    def test_stripped_signature_after_strict_after(self, verify, files):
        """Unsigned entries pass before strict_after and fail at or after it."""
        lines = list(LINES)
        lines[2] = foreign_line(lines[2], "unsigned")
        lines[6] = foreign_line(lines[6], "unsigned")
        write_lines(files["log"], lines)
        trust = _trust_file(files["dir"] / "t.json", trust_for(KEY, strict_after=moment(5)))
        _broken(
            verify(files["log"], "--trust-store", trust), 7, "unsigned at or after strict_after"
        )
        before_only = trust_for(KEY, strict_after=moment(COUNT))
        _ok(verify(files["log"], "--trust-store", _trust_file(trust, before_only)), COUNT)

    def test_stripped_signature_at_strict_after_exactly(self, verify, files):
        """An unsigned entry sealed exactly at strict_after fails (the boundary is inclusive)."""
        lines = list(LINES)
        lines[4] = foreign_line(lines[4], "unsigned")
        write_lines(files["log"], lines)
        trust = _trust_file(files["dir"] / "t.json", trust_for(KEY, strict_after=moment(4)))
        _broken(verify(files["log"], "--trust-store", trust), 5, "strict_after")

    def test_stripped_signature_with_strict(self, verify, files):
        """--strict fails the first unsigned entry whatever the trust store says."""
        lines = list(LINES)
        lines[3] = foreign_line(lines[3], "unsigned")
        write_lines(files["log"], lines)
        _ok(verify(files["log"], "--key", files["pem"]), COUNT)
        _broken(verify(files["log"], "--key", files["pem"], "--strict"), 4, "unsigned (--strict)")

    def test_revoked_key(self, verify, files):
        """A key revoked at entry 5's time fails entries 5 onwards: BROKEN line 5."""
        store = TrustStore(
            keys=(TrustedKey(KEY.key_id, KEY.public_raw),),
            revocations=(Revocation(KEY.key_id, moment(4), "leaked"),),
        )
        trust = _trust_file(files["dir"] / "t.json", store)
        _broken(verify(files["log"], "--trust-store", trust), 5, f"{KEY.key_id} is revoked")

    @pytest.mark.parametrize(
        ("valid_from", "valid_until", "line"),
        [(None, 3, 5), (2, None, 1), (0, 9, None), (3, 3, 1)],
    )
    def test_key_outside_validity_window(self, verify, files, valid_from, valid_until, line):
        """Entries outside the key's [valid_from, valid_until] window fail at the first one."""
        store = TrustStore(
            keys=(
                TrustedKey(
                    KEY.key_id,
                    KEY.public_raw,
                    None if valid_from is None else moment(valid_from),
                    None if valid_until is None else moment(valid_until),
                ),
            )
        )
        trust = _trust_file(files["dir"] / "t.json", store)
        result = verify(files["log"], "--trust-store", trust)
        if line is None:
            _ok(result, COUNT)
        else:
            _broken(result, line, "is not valid at")

    def test_trust_store_and_key_together(self, verify, files):
        """--key adds to --trust-store: entries by a second key verify too."""
        lines = [*LINES, *lines_of(build_chain(2, OTHER, prev_hash=entry_hash(LINES[-1])))]
        write_lines(files["log"], lines)
        trust = _trust_file(files["dir"] / "t.json", trust_for(KEY))
        _broken(verify(files["log"], "--trust-store", trust), COUNT + 1, "unknown signing key")
        _ok(verify(files["log"], "--trust-store", trust, "--key", files["other"]), COUNT + 2)

    def test_impossible_timestamp(self, verify, files):
        """An entry dated month 13 is BROKEN at its line, exit 1."""
        lines = list(LINES)
        lines[3] = lines[3].replace(b'"ts_utc":"2026-11', b'"ts_utc":"2026-13', 1)
        write_lines(files["log"], lines)
        _broken(verify(files["log"], "--key", files["pem"]), 4)


class TestCheckpoints:
    def test_home_newest_checkpoint_detects_truncation(self, run_inproc, home):
        """Cutting the home's chain below its newest checkpoint: BROKEN at the first missing line."""
        _append(home, 6)
        result = run_inproc(["--home", str(home), "checkpoint"])
        assert result.code == 0, result
        assert result.json()["entries"] == 6
        _ok(run_inproc(["--home", str(home), "verify-chain"]), 6)
        _keep_lines(home / "events.jsonl", 4)
        _broken(run_inproc(["--home", str(home), "verify-chain"]), 5, "truncated")

    def test_checkpoint_does_not_launder_truncation(self, run_inproc, home):
        """After a truncation, `ledger checkpoint` refuses, and verify-chain still fails."""
        _append(home, 6)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        _keep_lines(home / "events.jsonl", 4)
        again = run_inproc(["--home", str(home), "checkpoint"])
        assert again.code == 1, again
        _broken(run_inproc(["--home", str(home), "verify-chain"]), 5, "truncated")

    def test_newest_of_several_checkpoints_is_used(self, run_inproc, home):
        """The newest checkpoint is the one held against the chain."""
        _append(home, 3)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        _append(home, 3, first=3)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        _keep_lines(home / "events.jsonl", 5)
        _broken(run_inproc(["--home", str(home), "verify-chain"]), 6, "truncated")

    def test_the_newest_checkpoint_is_read_alone(self, run_inproc, home, monkeypatch):
        """Among many checkpoints the newest is found by name and is the only one read."""
        from ledger.edges import fileio
        from ledger.edges.files import checkpointfiles

        for first in range(0, 8, 2):
            _append(home, 2, first=first)
            assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        read: list[str] = []
        real = checkpointfiles.load_checkpoint

        def counted(path: Path) -> object:
            read.append(path.name)
            return real(path)

        monkeypatch.setattr(checkpointfiles, "load_checkpoint", counted)
        # Nothing read before counts.
        monkeypatch.setattr(checkpointfiles, "_KNOWN", ByIdentity())
        monkeypatch.setattr(fileio, "SETTLED_NS", -(10**18))  # as if written long ago
        found = checkpointfiles.CheckpointDir(home / "checkpoints").newest()
        assert found is not None
        assert found[1].entries == 8
        assert len(read) == 1
        checkpointfiles.CheckpointDir(home / "checkpoints").newest()
        assert len(read) == 1  # the same file again: remembered by its identity

    def test_a_listed_directory_is_listed_again_only_when_it_changes(
        self, run_inproc, home, monkeypatch
    ):
        """A settled directory is not listed on every ask; a new checkpoint changes it
        and is found."""
        from ledger.edges import fileio
        from ledger.edges.files import checkpointfiles

        _append(home, 2)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        directory = home / "checkpoints"
        # As if the directory had settled long before it is listed.
        monkeypatch.setattr(fileio, "SETTLED_NS", -(10**18))
        listings: list[Path] = []
        real = os.listdir

        def counted(path: Path) -> list[str]:
            listings.append(path)
            return real(path)

        monkeypatch.setattr(os, "listdir", counted)
        for _ in range(3):
            found = checkpointfiles.CheckpointDir(directory).newest()
            assert found is not None
            assert found[1].entries == 2
        assert len(listings) <= 1
        _append(home, 2, first=2)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        found = checkpointfiles.CheckpointDir(directory).newest()
        assert found is not None
        assert found[1].entries == 4

    def test_a_directory_that_just_changed_is_not_remembered(self, run_inproc, home):
        """Changed within SETTLED_NS of being listed: listed again next time."""
        from ledger.edges.fileio import file_identity
        from ledger.edges.files import checkpointfiles

        _append(home, 2)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        directory = home / "checkpoints"
        os.utime(directory)  # now
        assert checkpointfiles.CheckpointDir(directory).newest() is not None
        assert checkpointfiles._LISTINGS.get(file_identity(directory)) is None

    def test_a_checkpoint_rewritten_in_place_is_read_again(self, run_inproc, home):
        """Same name, new bytes: read again (and refused here), never the remembered one."""
        from ledger.edges.files.checkpointfiles import CheckpointDir
        from ledger.errors import InputDataError

        _append(home, 2)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        directory = home / "checkpoints"
        assert CheckpointDir(directory).newest() is not None
        path = next(directory.glob("checkpoint-*.json"))
        data = path.read_bytes()
        with path.open("r+b") as handle:
            handle.write(b"[" + data[1:])
        with pytest.raises(InputDataError):
            CheckpointDir(directory).newest()

    def test_a_checkpoint_whose_name_lies_makes_every_one_read(self, run_inproc, home):
        """A newer name over an older checkpoint: the contents decide, as before."""
        from ledger.edges.files.checkpointfiles import CheckpointDir

        _append(home, 2)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        older = next((home / "checkpoints").glob("checkpoint-*.json"))
        _append(home, 2, first=2)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        older.rename(older.with_name("checkpoint-29991231T235959000000Z-000000000002.json"))
        found = CheckpointDir(home / "checkpoints").newest()
        assert found is not None
        assert found[1].entries == 4

    def test_checkpoint_option_with_log(self, run_inproc, verify, home, tmp_path):
        """--checkpoint F with LOG: a log cut below the checkpoint fails at the first missing line."""
        _append(home, 6)
        written = run_inproc(["--home", str(home), "checkpoint"]).json()
        key_id = json.loads((home / "trust.json").read_bytes())["keys"][0]["key_id"]
        pem = home / "keys" / f"{key_id}.pub.pem"
        log = tmp_path / "copy.jsonl"
        log.write_bytes((home / "events.jsonl").read_bytes())
        _ok(verify(log, "--key", pem, "--checkpoint", written["path"]), 6)
        _keep_lines(log, 3)
        _ok(verify(log, "--key", pem), 3)
        _broken(verify(log, "--key", pem, "--checkpoint", written["path"]), 4, "truncated")

    def test_checkpoint_signed_by_untrusted_key(self, verify, files):
        """A checkpoint whose signer is not trusted is a failure (exit 1, one ledger: line)."""
        path = files["dir"] / "cp.json"
        path.write_bytes(canonical_bytes(checkpoint_of(LINES, OTHER).to_document()))
        result = verify(files["log"], "--key", f"{KEY.key_id}={files['pem']}", "--checkpoint", path)
        assert result.code == 1
        assert result.stderr.startswith("ledger: checkpoint: ")

    def test_truncate_then_reappend(self, run_inproc, home):
        """Cut below the checkpoint and re-grown with the home's valid key: BROKEN at entry N."""
        _append(home, 6)
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        _keep_lines(home / "events.jsonl", 4)
        _append(home, 3, first=100)
        _broken(
            run_inproc(["--home", str(home), "verify-chain"]),
            6,
            "differs from the checkpoint's head",
        )

    def test_reappend_in_memory_log_with_checkpoint_option(self, verify, files):
        """Same with LOG and --checkpoint: a re-grown log fails at the checkpoint's count."""
        path = files["dir"] / "cp.json"
        path.write_bytes(canonical_bytes(checkpoint_of(LINES, KEY, 8).to_document()))
        regrown = [
            *LINES[:5],
            *lines_of(build_chain(5, KEY, prev_hash=entry_hash(LINES[4]), first_index=77)),
        ]
        write_lines(files["log"], regrown)
        _ok(verify(files["log"], "--key", files["pem"]), COUNT)
        _broken(verify(files["log"], "--key", files["pem"], "--checkpoint", path), 8, "differs")


class TestOtherImplementations:
    @pytest.mark.parametrize("style", ["jcs", "reversed"])
    @pytest.mark.parametrize("with_id", [False, True], ids=["key", "id=key"])
    def test_foreign_chain_verifies(self, verify, files, style, with_id):
        """A chain written as full-entry RFC 8785 or in another key order verifies with --key."""
        write_lines(files["log"], [foreign_line(raw, style) for raw in LINES])
        key = f"{KEY.key_id}={files['pem']}" if with_id else str(files["pem"])
        _ok(verify(files["log"], "--key", key), COUNT)

    def test_mixed_writers(self, verify, files):
        """Lines from both writers interleave in one chain."""
        lines = [foreign_line(raw, "jcs") if i % 2 else raw for i, raw in enumerate(LINES)]
        write_lines(files["log"], lines)
        _ok(verify(files["log"], "--key", files["pem"]), COUNT)

    def test_foreign_tamper_detected(self, verify, files):
        """A payload change in a foreign-written line fails its signature."""
        lines = [foreign_line(raw, "jcs") for raw in LINES]
        lines[4] = lines[4].replace(b'"actual_micros":1004', b'"actual_micros":1005', 1)
        write_lines(files["log"], lines)
        _broken(verify(files["log"], "--key", files["pem"]), 5, "signature does not verify")

    def test_spec_field_order_compact(self, verify, files):
        """A chain written in SPEC §2's field order, compact JSON, verifies with --key."""
        write_lines(files["log"], [foreign_line(raw, "table") for raw in LINES])
        _ok(verify(files["log"], "--key", files["pem"]), COUNT)


@pytest.fixture(scope="module")
def large_log(tmp_path_factory) -> tuple[Path, Path, list[bytes]]:
    """A chain of more than 4 MiB, so verify-chain takes the parallel path."""
    directory = tmp_path_factory.mktemp("large")
    count = 4 * 1024 * 1024 // len(LINES[0]) + 1000
    lines = lines_of(build_chain(count, KEY))
    log = write_lines(directory / "large.jsonl", lines)
    assert log.stat().st_size > _PARALLEL_MIN_BYTES
    return log, write_public_pem(directory / "key.pem", KEY), lines


class TestLargeChain:
    def test_parallel_path_ok(self, verify, large_log):
        """A > 4 MiB chain verifies with the right count."""
        log, pem, lines = large_log
        assert (os.cpu_count() or 1) >= 2, "the parallel path needs two cores"
        _ok(verify(log, "--key", pem), len(lines))

    def test_parallel_path_reports_deep_tamper(self, verify, large_log, tmp_path):
        """An edited line deep inside and a deleted one are reported at their line numbers."""
        _log, pem, lines = large_log
        edited = list(lines)
        deep = len(lines) * 7 // 10 + 3
        edited[deep - 1] = edited[deep - 1].replace(b"openai", b"openaj", 1)
        target = write_lines(tmp_path / "edited.jsonl", edited)
        _broken(verify(target, "--key", pem), deep, "signature does not verify")

        second = len(lines) // 2 + 17
        target = write_lines(tmp_path / "deleted.jsonl", lines[: second - 1] + lines[second:])
        _broken(verify(target, "--key", pem), second, "prev_hash does not match")

    def test_stitched_ranges_report_links_across_boundaries(self, large_log, tmp_path):
        """Swapping the lines on either side of a parallel range boundary is reported at the
        same line as a serial verify: the first line of the pair."""
        log, _pem, lines = large_log
        size = log.stat().st_size
        bounds = byte_ranges(ChainFile(log), size, os.cpu_count() or 2)
        first_of_range = _lines_before(log, bounds[2][0]) + 1
        for line in (first_of_range - 1, first_of_range):
            damaged = list(lines)
            damaged[line - 1], damaged[line] = damaged[line], damaged[line - 1]
            assert len(damaged[line - 1]) == len(damaged[line])  # same bounds as the original
            target = write_lines(tmp_path / f"swap-{line}.jsonl", damaged)
            report = ChainFile(target).verify(trust_for(KEY))
            assert (report.ok, report.line) == (False, line)
            assert report.reason == "prev_hash does not match the previous entry"


def _lines_before(path: Path, offset: int) -> int:
    """How many lines end before byte ``offset``."""
    with path.open("rb") as handle:
        return handle.read(offset).count(b"\n")
