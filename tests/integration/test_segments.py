"""The chain in segments: sealed by signed checkpoints, one hash chain, read whole (SPEC §21)."""

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from ledger.core.chain import ChainVerifier
from ledger.core.envelope import GENESIS, parse_line
from ledger.core.timefmt import format_ts
from ledger.edges import fileio
from ledger.edges.files import sealing, segmentfiles
from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.keyfiles import KeyDir
from ledger.runtime import Runtime
from tests.helpers.segments import (
    append_records,
    hashes_of,
    manifest,
    rewrite_segment,
    seal_every,
    segment_bytes,
    segment_lines,
)

LOA = Path(__file__).resolve().parents[1] / "fixtures" / "loa"


def _verify(run_inproc, home: Path, *extra: str) -> dict[str, object]:
    result = run_inproc(["--home", str(home), "verify-chain", "--json", *extra])
    document: dict[str, object] = json.loads(result.stdout)
    return document


def _whole(home: Path) -> list[bytes]:
    return list(Runtime(home, {}).chain.iter_lines())


@pytest.fixture
def sealed_home(home: Path) -> Path:
    """Ten entries sealed three to a segment: segments 1–3 and one open entry."""
    seal_every(home, 3)
    append_records(home, 10)
    return home


class TestSealing:
    def test_the_open_segment_is_sealed_at_its_limit(self, sealed_home):
        """Three segments of three entries each are sealed; events.jsonl holds the tenth."""
        names = sorted(path.name for path in (sealed_home / "segments").glob("0*"))
        assert names == [f"00000{n}.{ext}" for n in (1, 2, 3) for ext in ("json", "jsonl.zst")]
        assert len((sealed_home / "events.jsonl").read_bytes().splitlines()) == 1
        for number in (1, 2, 3):
            assert manifest(sealed_home, number)["entries"] == 3

    def test_segments_link_into_one_hash_chain(self, sealed_home):
        """Each segment's first entry links to the head its predecessor's checkpoint seals."""
        previous = GENESIS
        for number in (1, 2, 3):
            lines = segment_lines(sealed_home, number)
            assert parse_line(lines[0].rstrip(b"\n")).prev_hash == previous
            checkpoint = manifest(sealed_home, number)["checkpoint"]
            assert isinstance(checkpoint, dict)
            assert checkpoint["head_hash"] == hashes_of(lines)[-1]
            assert checkpoint["entries"] == 3 * number
            previous = str(checkpoint["head_hash"])
        first_open = (sealed_home / "events.jsonl").read_bytes()
        assert parse_line(first_open.rstrip(b"\n")).prev_hash == previous

    def test_readers_see_every_line_once_in_order(self, sealed_home):
        """The chain reads as the sealed segments then events.jsonl; the head counts them all."""
        lines = _whole(sealed_home)
        expected = b"".join(segment_bytes(sealed_home, n) for n in (1, 2, 3))
        assert b"".join(lines) == expected + (sealed_home / "events.jsonl").read_bytes()
        head = Runtime(sealed_home, {}).chain.head()
        assert head is not None
        assert head.size == sum(len(line) for line in lines)
        assert head.entry_hash == hashes_of(lines)[-1]
        # A read from a position inside a sealed segment starts at that line.
        start = len(b"".join(lines[:4]))
        assert list(Runtime(sealed_home, {}).chain.iter_lines(start, start + len(lines[4]))) == [
            lines[4]
        ]

    def test_verify_chain_reads_every_segment(self, sealed_home, run_inproc):
        """Incremental, full and parallel verification all count the ten entries."""
        assert _verify(run_inproc, sealed_home)["entries"] == 10
        assert run_inproc(["--home", str(sealed_home), "checkpoint"]).code == 0
        assert _verify(run_inproc, sealed_home, "--full")["entries"] == 10
        assert _verify(run_inproc, sealed_home, "--full", "--jobs", "2")["ok"] is True

    def test_an_empty_open_segment_takes_its_head_from_the_newest_segment(self, home):
        """Right after a seal the head is the sealed head, and the next entry links to it."""
        seal_every(home, 3)
        hashes = append_records(home, 3)
        assert (home / "events.jsonl").read_bytes() == b""
        head = Runtime(home, {}).chain.head()
        assert head is not None
        assert head.entry_hash == hashes[-1]
        append_records(home, 1, first=3)
        line = (home / "events.jsonl").read_bytes()
        assert parse_line(line.rstrip(b"\n")).prev_hash == hashes[-1]

    def test_counters_and_reports_are_the_same_before_and_after_sealing(self, tmp_path, run_inproc):
        """A home sealed every two entries shows the figures of one that never seals."""
        now = {"LEDGER_NOW": "2026-11-20T12:00:00Z"}
        outputs = []
        for name, limit in (("plain", None), ("sealed", 2)):
            home = tmp_path / name
            assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "100"]).code == 0
            if limit is not None:
                seal_every(home, limit)
            for amount in ("0.25", "1.5", "0.75", "2", "0.5"):
                args = ["--home", str(home), "record", amount, "--provider", "openai"]
                assert run_inproc(args, now).code == 0
            usage = run_inproc(["--home", str(home), "usage"], now).json()
            report = run_inproc(["--home", str(home), "report", "--json"], now).json()
            rebuilt = run_inproc(["--home", str(home), "rebuild-state"], now)
            assert rebuilt.code == 0, rebuilt
            after = run_inproc(["--home", str(home), "usage"], now).json()
            outputs.append((usage, _figures(report), after))
        assert (tmp_path / "sealed" / "segments" / "000002.json").exists()
        assert outputs[0] == outputs[1]

    def test_segment_entries_must_be_a_positive_integer(self, home, run_inproc):
        """``chain.segment_entries = 0`` is a config error naming the key."""
        seal_every(home, 0)
        result = run_inproc(["--home", str(home), "usage"])
        assert result.code == 78
        assert "chain.segment_entries" in result.stderr


def _figures(report: dict[str, object]) -> object:
    """A report's money figures (without what names the run: times, paths)."""
    return report.get("scopes", report.get("caps", {k: v for k, v in report.items() if "usd" in k}))


class TestHeadOnTheCallPath:
    def test_the_head_reads_the_newest_manifest_alone(self, sealed_home, monkeypatch):
        """A verdict's head parses one manifest, not one per segment (a segment a day is 365)."""
        loaded: list[str] = []
        load = segmentfiles.SegmentDir.load

        def counted(self: segmentfiles.SegmentDir, path: Path) -> object:
            loaded.append(path.name)
            return load(self, path)

        monkeypatch.setattr(segmentfiles.SegmentDir, "load", counted)
        segmentfiles.forget_listings()
        newest = segmentfiles.SegmentDir(sealed_home / "segments").newest()
        assert newest is not None
        assert newest.number == 3
        assert loaded == ["000003.json"]
        assert Runtime(sealed_home, {}).chain.head() is not None
        assert set(loaded) == {"000003.json"}  # read again: a folder changed just now is not kept

    def test_a_manifest_missing_from_the_middle_still_fails_the_head(self, sealed_home):
        """Without segment 2's manifest the head names the gap where it begins, as a listing does."""
        (sealed_home / "segments" / "000002.json").unlink()
        segmentfiles.forget_listings()
        with pytest.raises(segmentfiles.SegmentGapError) as raised:
            segmentfiles.SegmentDir(sealed_home / "segments").newest()
        assert raised.value.line == 4


class TestDamage:
    def test_an_edit_inside_a_sealed_segment_is_found_at_its_line(self, sealed_home, run_inproc):
        """One changed provider in segment 2's second line: BROKEN line 5 of the whole chain."""
        data = segment_bytes(sealed_home, 2)
        lines = data.splitlines(keepends=True)
        lines[1] = lines[1].replace(b'"openai"', b'"openaj"', 1)  # the same length
        rewrite_segment(sealed_home, 2, b"".join(lines))
        for extra in ((), ("--full",)):
            found = _verify(run_inproc, sealed_home, *extra)
            assert (found["ok"], found["line"]) == (False, 5), found

    def test_a_removed_segment_is_found_where_it_began(self, sealed_home, run_inproc):
        """Segment 2 gone (manifest and data): BROKEN at its first line, 4."""
        for suffix in (".json", ".jsonl.zst"):
            (sealed_home / "segments" / f"000002{suffix}").unlink()
        found = _verify(run_inproc, sealed_home, "--full")
        assert (found["ok"], found["line"]) == (False, 4), found
        verdict = run_inproc(
            ["--home", str(sealed_home), "verdict", "0.01", "--provider", "openai"]
        )
        assert verdict.code == 1
        assert verdict.json()["verdict"] == "halt-uncertainty"

    def test_a_segment_cut_at_its_end_fails_its_checkpoint(self, sealed_home, run_inproc):
        """The newest segment loses its last line and the open segment is emptied: every link
        still holds, but the segment's own signed checkpoint names the missing head."""
        lines = segment_lines(sealed_home, 3)
        rewrite_segment(sealed_home, 3, b"".join(lines[:-1]))
        (sealed_home / "events.jsonl").write_bytes(b"")
        found = _verify(run_inproc, sealed_home, "--full")
        assert found["ok"] is False
        assert "segment 000003 does not match its signed checkpoint" in str(found["reason"])
        assert found["line"] == 8

    def test_recover_restores_a_chain_damaged_inside_a_segment(self, sealed_home, run_inproc):
        """Recover keeps the damaged segments as evidence and leaves a chain that verifies."""
        home = sealed_home
        assert run_inproc(["--home", str(home), "snapshot"]).code == 0
        data = segment_bytes(home, 3)
        rewrite_segment(home, 3, data.replace(b'"openai"', b'"openaj"', 1))
        result = run_inproc(["--home", str(home), "recover"])
        assert result.code == 0, result
        assert (home / "evidence" / "000003.json").exists()
        assert (home / "segments" / "000002.json").exists()
        assert _verify(run_inproc, home, "--full")["ok"] is True


class TestInterruptedSeal:
    def test_a_seal_cut_short_after_its_manifest_counts_nothing_twice(
        self, home, run_inproc, monkeypatch
    ):
        """A crash after the manifest, before events.jsonl is emptied: readers skip the copy,
        the next writer empties it, nothing is lost or counted twice."""
        seal_every(home, 3)
        real = fileio.atomic_write

        def crash_on_emptying(path, data, *args, **kwargs):
            if path.name == "events.jsonl" and data == b"":
                raise KeyboardInterrupt  # stands for the process dying here
            return real(path, data, *args, **kwargs)

        monkeypatch.setattr(sealing, "atomic_write", crash_on_emptying)
        with pytest.raises(KeyboardInterrupt):
            append_records(home, 3)
        monkeypatch.setattr(sealing, "atomic_write", real)
        assert (home / "segments" / "000001.json").exists()
        assert len((home / "events.jsonl").read_bytes().splitlines()) == 3
        assert len(_whole(home)) == 3
        assert _verify(run_inproc, home)["entries"] == 3
        append_records(home, 1, first=3)
        assert len((home / "events.jsonl").read_bytes().splitlines()) == 1
        assert _verify(run_inproc, home, "--full")["entries"] == 4

    def test_a_seal_cut_short_before_its_manifest_leaves_the_chain_as_it_was(
        self, home, run_inproc, monkeypatch
    ):
        """A crash after the compressed copy, before the manifest: no segment yet; the next
        seal replaces the stray copy."""
        seal_every(home, 3)
        real = segmentfiles.SegmentDir.write_manifest

        def crash(self, segment):
            raise KeyboardInterrupt

        monkeypatch.setattr(segmentfiles.SegmentDir, "write_manifest", crash)
        with pytest.raises(KeyboardInterrupt):
            append_records(home, 3)
        monkeypatch.setattr(segmentfiles.SegmentDir, "write_manifest", real)
        assert not (home / "segments" / "000001.json").exists()
        assert _verify(run_inproc, home)["entries"] == 3
        append_records(home, 3, first=3)
        assert manifest(home, 1)["entries"] == 4  # sealed by the first append after
        assert _verify(run_inproc, home, "--full")["entries"] == 6


class TestLoaInterop:
    def test_each_segment_verifies_given_its_predecessors_head(self, sealed_home):
        """A plain envelope verifier, given only the head before, verifies each segment alone."""
        trust = KeyDir(sealed_home).load_trust()
        previous = GENESIS
        for number in (1, 2, 3):
            verifier = ChainVerifier(trust, expected_prev=previous)
            for raw in segment_lines(sealed_home, number):
                assert verifier.feed(raw)
            report = verifier.report()
            assert report.ok
            assert report.entries == 3
            assert report.head_hash is not None
            previous = report.head_hash

    def test_a_loa_chain_taken_over_is_sealed_and_still_verifies(self, tmp_path, run_inproc):
        """loa's entries and ours, sealed together: the first segment verifies as a log of
        its own with both keys, and the whole chain with the home's trust store."""
        home = tmp_path / "home"
        home.mkdir()
        shutil.copy(LOA / "loa-sample-chain.jsonl", home / "events.jsonl")
        assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "100"]).code == 0
        pem = LOA / "loa-sample-chain.pub.pem"
        assert run_inproc(["--home", str(home), "keys", "trust", f"demo-writer={pem}"]).code == 0
        seal_every(home, 8)
        append_records(home, 4)
        assert (home / "segments" / "000001.json").exists()
        log = tmp_path / "segment-1.jsonl"
        log.write_bytes(segment_bytes(home, 1))
        trust = home / "trust.json"
        result = run_inproc(["verify-chain", str(log), "--trust-store", str(trust)])
        assert result.code == 0, result
        assert _verify(run_inproc, home, "--full")["ok"] is True


class TestGroupCommit:
    def test_a_group_seals_once_its_appends_are_durable(self, home, run_inproc):
        """Inside one group commit (``ledger serve``) the seal waits for the group's end."""
        from ledger.edges.files.groupcommit import group_commit
        from ledger.services.chain.writer import Writer
        from tests.helpers.chains import record_payload

        seal_every(home, 3)
        runtime = Runtime(home, {})
        writer = Writer(runtime)
        assert isinstance(runtime.chain, ChainFile)
        with group_commit(runtime.chain):
            for index in range(5):
                writer.append_one("budget.record_call", record_payload(index))
            assert not (home / "segments" / "000001.json").exists()
        assert manifest(home, 1)["entries"] == 5
        assert (home / "events.jsonl").read_bytes() == b""
        assert _verify(run_inproc, home, "--full")["entries"] == 5


class TestSnapshots:
    def test_a_sealed_segment_is_copied_once_and_the_open_one_each_time(
        self, sealed_home, run_inproc
    ):
        """Two snapshots name the same three segment copies; each has its own open part,
        and each restores the whole chain."""
        home = sealed_home
        first = run_inproc(["--home", str(home), "snapshot"])
        assert first.code == 0, first
        append_records(home, 1, first=10)
        second = run_inproc(["--home", str(home), "snapshot"])
        assert second.code == 0, second
        copies = sorted((home / "snapshots" / "segments").glob("*.jsonl.zst"))
        assert [path.name[:6] for path in copies] == ["000001", "000002", "000003", "000004"]
        manifests = [json.loads(Path(r.json()["path"]).read_text()) for r in (first, second)]
        assert [len(m["segments"]) for m in manifests] == [3, 4]
        assert manifests[0]["segments"] == manifests[1]["segments"][:3]
        # ``files`` names the copies each snapshot made, and only those.
        made = [Path(name).name[:6] for name in first.json()["files"] if "/segments/" in name]
        assert made == ["000001", "000002", "000003"]
        made = [Path(name).name[:6] for name in second.json()["files"] if "/segments/" in name]
        assert made == ["000004"]

    def test_recover_restores_from_a_snapshot_of_segments(self, sealed_home, run_inproc):
        """A chain damaged in its open segment is restored from a snapshot that names copies."""
        home = sealed_home
        assert run_inproc(["--home", str(home), "snapshot"]).code == 0
        (home / "events.jsonl").write_bytes(b'{"torn": \n')
        result = run_inproc(["--home", str(home), "recover"])
        assert result.code == 0, result
        assert result.json()["snapshot"] is not None
        assert _verify(run_inproc, home, "--full")["ok"] is True

    def test_pruning_never_removes_the_only_copy(self, sealed_home, run_inproc):
        """Old snapshots go; a copy the remaining ones name, or of a segment the home no
        longer holds, stays."""
        home = sealed_home
        # A day after the entries were sealed, and three months after that.
        sealed_at = dt.datetime.now(dt.UTC)
        old = {"LEDGER_NOW": format_ts(sealed_at + dt.timedelta(days=1))}
        assert run_inproc(["--home", str(home), "snapshot"], old).code == 0
        copies = sorted((home / "snapshots" / "segments").glob("*.jsonl.zst"))
        later = {"LEDGER_NOW": format_ts(sealed_at + dt.timedelta(days=91))}
        result = run_inproc(["--home", str(home), "snapshot"], later)
        assert result.code == 0, result
        assert len(list((home / "snapshots").glob("*.manifest.json"))) == 1  # the old one went
        assert sorted((home / "snapshots" / "segments").glob("*.jsonl.zst"))[:3] == copies
        # A copy no snapshot names goes only while the home still holds its segment.
        from ledger.edges.files import snapshotsegments

        archived = copies[0]
        snapshotsegments.remove_unnamed(home / "snapshots", [], home_has=set())
        assert archived.exists()
        snapshotsegments.remove_unnamed(
            home / "snapshots", [], home_has={str(manifest(home, 1)["compressed_sha256"])}
        )
        assert not archived.exists()


class TestCounting:
    @pytest.mark.parametrize("resident", [True, False])
    def test_the_seal_comes_at_exactly_the_limit(self, home, resident, monkeypatch):
        """Counted incrementally (in memory, or from the hint file a new process reads), the
        open segment is sealed at exactly ``segment_entries`` entries."""
        seal_every(home, 150)
        if not resident:  # each append as a new process would make it
            monkeypatch.setattr(sealing, "_COUNTED", _Forgetful())
        append_records(home, 160)
        assert manifest(home, 1)["entries"] == 150
        assert len((home / "events.jsonl").read_bytes().splitlines()) == 10
        assert not (home / "segments" / "000002.json").exists()


class _Forgetful(dict):  # type: ignore[type-arg]
    """A memory that never keeps anything."""

    def __setitem__(self, key: object, value: object) -> None:
        return None


class TestSealOutsideTheLock:
    def test_entries_appended_while_a_segment_is_compressed_stay_in_the_open_one(
        self, home, run_inproc, monkeypatch
    ):
        """The lock is free while the sealed bytes are compressed: a writer that appends
        then finds its entry in the new open segment, once, linked to the sealed head."""
        seal_every(home, 3)
        real = segmentfiles.SegmentDir.write_data
        during: list[str] = []
        started: list[int] = []

        def compress_while_another_writes(self, number, fd, size):
            if not started:  # the first seal only; the other writer's own try comes later
                started.append(size)
                # A writer that does not seal itself (its limit is higher).
                higher = {"LEDGER_CHAIN_SEGMENT_ENTRIES": "100"}
                during.extend(append_records(home, 1, first=100, env=higher))
            return real(self, number, fd, size)

        monkeypatch.setattr(segmentfiles.SegmentDir, "write_data", compress_while_another_writes)
        hashes = append_records(home, 3)
        assert manifest(home, 1)["entries"] == 3
        assert hashes_of(segment_lines(home, 1)) == hashes
        open_lines = (home / "events.jsonl").read_bytes().splitlines(keepends=True)
        assert hashes_of(open_lines) == during
        assert _verify(run_inproc, home, "--full")["entries"] == 4


class TestReaders:
    def test_explain_and_prove_find_an_entry_in_a_sealed_segment(self, home, run_inproc):
        """A verdict sealed into segment 1 is still explained and proved by its ref."""
        seal_every(home, 3)
        verdict = run_inproc(["--home", str(home), "verdict", "0.01", "--provider", "openai"])
        ref = verdict.json()["verdict_ref"]
        append_records(home, 4)
        assert (home / "segments" / "000001.json").exists()
        explained = run_inproc(["--home", str(home), "explain", ref])
        assert explained.code == 0, explained
        assert "line 1" in explained.stdout
        assert run_inproc(["--home", str(home), "checkpoint"]).code == 0
        proved = run_inproc(["--home", str(home), "prove", "inclusion", ref])
        assert proved.code == 0, proved
        assert proved.json()["leaf_index"] == 0

    def test_parallel_verification_takes_segments_side_by_side(
        self, sealed_home, run_inproc, monkeypatch
    ):
        """With the parallel path forced on a small chain, the segments and the open part are
        verified in worker processes and stitched: an edit is still found at its line."""
        from ledger.edges.files import chainverify

        monkeypatch.setattr(chainverify, "_PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(chainverify, "_MIN_RANGE_BYTES", 1)
        assert _verify(run_inproc, sealed_home, "--full", "--jobs", "2")["entries"] == 10
        data = segment_bytes(sealed_home, 3)
        rewrite_segment(sealed_home, 3, data.replace(b'"openai"', b'"openaj"', 1))
        found = _verify(run_inproc, sealed_home, "--full", "--jobs", "2")
        assert (found["ok"], found["line"]) == (False, 7), found

    def test_a_segment_is_cut_into_ranges_on_its_frames(self, home, run_inproc, monkeypatch):
        """A sealed segment of many small frames is verified in several line-aligned ranges;
        an edit deep inside it is found at its line."""
        from ledger.edges.files import chainverify

        monkeypatch.setattr(segmentfiles, "FRAME_BYTES", 700)  # about a line a frame
        seal_every(home, 12)
        append_records(home, 13)
        frames = manifest(home, 1)["frames"]
        assert isinstance(frames, list)
        assert len(frames) > 6
        monkeypatch.setattr(chainverify, "_PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(chainverify, "_MIN_RANGE_BYTES", 1)
        segment = segmentfiles.SegmentDir(home / "segments").listing()[0]
        chain = Runtime(home, {}).chain
        assert isinstance(chain, ChainFile)
        ranges = chainverify.segment_ranges(chain, segment, 1)
        assert len(ranges) > 3
        lines = _whole(home)
        ends = {sum(len(line) for line in lines[:n]) for n in range(len(lines) + 1)}
        assert all(start in ends and stop in ends for start, stop in ranges)
        assert _verify(run_inproc, home, "--full", "--jobs", "2")["entries"] == 13
        data = segment_bytes(home, 1)
        lines = data.splitlines(keepends=True)
        lines[9] = lines[9].replace(b'"openai"', b'"openaj"', 1)
        rewrite_segment(home, 1, b"".join(lines))
        found = _verify(run_inproc, home, "--full", "--jobs", "2")
        assert (found["ok"], found["line"]) == (False, 10), found

    def test_verification_reads_a_manifest_edited_in_place(self, home, run_inproc, monkeypatch):
        """A process that listed the segments before (the listing is remembered once the
        folder settles) still verifies a segment and manifest rewritten in place as they now
        are: the edit is found at its line, never read through the old frame table."""
        from ledger.edges import fileio
        from ledger.edges.files import chainverify

        monkeypatch.setattr(fileio, "SETTLED_NS", -(10**18))  # every file counts as settled
        monkeypatch.setattr(segmentfiles, "FRAME_BYTES", 700)
        monkeypatch.setattr(chainverify, "_PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(chainverify, "_MIN_RANGE_BYTES", 1)
        seal_every(home, 12)
        append_records(home, 13)
        assert _verify(run_inproc, home, "--full", "--jobs", "2")["entries"] == 13
        lines = segment_bytes(home, 1).splitlines(keepends=True)
        lines[9] = lines[9].replace(b'"openai"', b'"openaj"', 1)
        rewrite_segment(home, 1, b"".join(lines))
        found = _verify(run_inproc, home, "--full", "--jobs", "2")
        assert (found["ok"], found["line"]) == (False, 10), found


class TestSegmentDays:
    def test_a_segment_is_sealed_once_its_first_entry_is_old_enough(self, home, run_inproc):
        """``chain.segment_days = 2``: the record two days after the first seals the segment."""
        config = home / "ledger.toml"
        config.write_text(config.read_text().replace("segment_days = 0", "segment_days = 2"))
        for day in (1, 2, 3, 4):
            now = {"LEDGER_NOW": f"2026-11-{day:02d}T12:00:00Z"}
            args = ["--home", str(home), "record", "0.5", "--provider", "openai"]
            assert run_inproc(args, now).code == 0
        assert manifest(home, 1)["entries"] == 3
        assert manifest(home, 1)["last_ts"] == "2026-11-03T12:00:00.000000Z"
        assert len((home / "events.jsonl").read_bytes().splitlines()) == 1
