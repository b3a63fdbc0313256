"""``ledger archive``: sealed segments leave the home; the chain still verifies (SPEC §21)."""

import json
import shutil
from pathlib import Path

import pytest

from ledger.core.archive import archive_problem
from ledger.edges.files import archivefiles
from ledger.edges.files.keyfiles import KeyDir
from tests.helpers.segments import seal_every


def _day(day: int) -> dict[str, str]:
    return {"LEDGER_NOW": f"2026-11-{day:02d}T12:00:00Z"}


@pytest.fixture
def dated_home(home: Path, run_inproc) -> Path:
    """Ten records, one a day from 2026-11-01, sealed three to a segment."""
    seal_every(home, 3)
    for day in range(1, 11):
        args = ["--home", str(home), "record", "0.5", "--provider", "openai"]
        assert run_inproc(args, _day(day)).code == 0
    return home


def _archive(run_inproc, home: Path, before: str, to: Path):
    return run_inproc(
        ["--home", str(home), "archive", "--before", before, "--to", str(to)], _day(20)
    )


def _verify(run_inproc, home: Path, *extra: str) -> dict[str, object]:
    result = run_inproc(["--home", str(home), "verify-chain", "--json", *extra], _day(20))
    document: dict[str, object] = json.loads(result.stdout)
    return document


class TestArchive:
    def test_moves_old_segments_and_keeps_their_manifests(self, dated_home, run_inproc, tmp_path):
        """Segments whose entries are all before the date leave; manifests and a signed
        archive manifest stay in the home."""
        target = tmp_path / "cold"
        result = _archive(run_inproc, dated_home, "2026-11-07", target)
        assert result.code == 0, result
        assert result.json()["archived"] == [1, 2]
        assert result.json()["entries"] == 6
        segments = dated_home / "segments"
        assert not (segments / "000001.jsonl.zst").exists()
        assert (segments / "000001.json").exists()
        assert (segments / "000003.jsonl.zst").exists()
        assert (target / "000001.jsonl.zst").exists()
        assert (target / "000002.json").exists()
        document = json.loads(Path(result.json()["manifest"]).read_text())
        assert [item["segment"] for item in document["segments"]] == [1, 2]
        assert archive_problem(document, KeyDir(dated_home).load_trust()) is None
        again = _archive(run_inproc, dated_home, "2026-11-07", target)
        assert again.json()["archived"] == []

    def test_the_recent_part_verifies_without_the_archive(self, dated_home, run_inproc, tmp_path):
        """With the archive gone, verify-chain holds the archived segments to their signed
        checkpoints and verifies the rest; verdicts go on."""
        target = tmp_path / "cold"
        assert _archive(run_inproc, dated_home, "2026-11-07", target).code == 0
        shutil.move(target, tmp_path / "offline")
        for extra in ((), ("--full",)):
            found = _verify(run_inproc, dated_home, *extra)
            assert (found["ok"], found["entries"]) == (True, 10), found
        verdict = run_inproc(
            ["--home", str(dated_home), "verdict", "0.1", "--provider", "openai"], _day(10)
        )
        assert verdict.code == 0, verdict
        usage = run_inproc(["--home", str(dated_home), "usage"], _day(10)).json()
        assert usage["usd_used_micros"] == 500_000

    def test_end_to_end_with_the_archive_given(self, dated_home, run_inproc, tmp_path):
        """--archive DIR reads the archived segments: the whole chain verifies, and an
        edited line in the archive is found at its line."""
        import zstandard

        target = tmp_path / "cold"
        assert _archive(run_inproc, dated_home, "2026-11-07", target).code == 0
        moved = tmp_path / "offline"
        shutil.move(target, moved)
        found = _verify(run_inproc, dated_home, "--full", "--archive", str(moved))
        assert (found["ok"], found["entries"]) == (True, 10), found
        copy = moved / "000002.jsonl.zst"
        data = zstandard.ZstdDecompressor().stream_reader(copy.read_bytes()).read()
        lines = data.splitlines(keepends=True)
        lines[0] = lines[0].replace(b'"openai"', b'"openaj"', 1)
        copy.chmod(0o644)
        copy.write_bytes(zstandard.ZstdCompressor().compress(b"".join(lines)))
        found = _verify(run_inproc, dated_home, "--full", "--archive", str(moved))
        assert (found["ok"], found["line"]) == (False, 4), found

    def test_bad_command_lines_exit_2(self, dated_home, run_inproc):
        """A DATE that is not a date, or a DIR inside the home, is a bad command line."""
        assert _archive(run_inproc, dated_home, "soon", dated_home.parent / "x").code == 2
        inside = _archive(run_inproc, dated_home, "2026-11-07", dated_home / "cold")
        assert inside.code == 2
        assert "inside the home" in inside.stderr

    @pytest.mark.parametrize("step", ["write_manifests", "remove_from_home"])
    def test_an_archive_cut_short_is_finished_by_running_it_again(
        self, dated_home, run_inproc, tmp_path, monkeypatch, step
    ):
        """A crash before the manifest or before the home's copies are removed leaves a
        chain that verifies; running the command again completes the move."""
        target = tmp_path / "cold"
        real = getattr(archivefiles, step)

        def crash(*args, **kwargs):
            raise KeyboardInterrupt  # stands for the process dying here

        monkeypatch.setattr(archivefiles, step, crash)
        assert _archive(run_inproc, dated_home, "2026-11-07", target).code != 0
        monkeypatch.setattr(archivefiles, step, real)
        assert _verify(run_inproc, dated_home, "--full")["ok"] is True
        result = _archive(run_inproc, dated_home, "2026-11-07", target)
        assert result.json()["archived"] == [1, 2], result
        assert not (dated_home / "segments" / "000001.jsonl.zst").exists()
        shutil.move(target, tmp_path / "offline")
        assert _verify(run_inproc, dated_home, "--full")["entries"] == 10
