"""``kill -9`` of ``ledger archive`` at each of its crash points: nothing lost (SPEC §21).

A run is held at a named point (``LEDGER_ARCHIVE_PAUSE_AT``: it writes the
point's name into a FIFO and waits there, ``ledger.edges.files.archivefiles``)
and killed with ``SIGKILL``. Then every sealed segment is in the home or the
archive, byte for byte; the chain verifies end to end with the archive given;
the budgets are what they were; and a second run finishes the move.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import clean_env
from tests.helpers.segments import seal_every

REPO = Path(__file__).resolve().parents[2]
NOW = {"LEDGER_NOW": "2026-11-20T12:00:00Z"}
BEFORE = "2026-11-10"  # segments 1–3 (entries of days 1–9) are all older
SEGMENTS = (1, 2, 3)
# Where a run can stop: a segment copied before its manifest, both copied,
# mid-way through several segments, the signed manifest in the archive only,
# then in the home too, and the home's files removed one by one.
POINTS = [
    "data-copied:1",
    "manifest-copied:1",
    "data-copied:2",
    "archive-manifest-archived",
    "archive-manifest-home",
    "removed:1",
    "removed:2",
    "removed:3",
]
# A hang guard only (the run reaches its point in well under a second).
_GIVE_UP_S = 60.0


@pytest.fixture
def dated_home(home: Path, run_inproc) -> Path:
    """Ten records, one a day from 2026-11-01, sealed three to a segment."""
    seal_every(home, 3)
    for day in range(1, 11):
        args = ["--home", str(home), "record", "0.5", "--provider", "openai"]
        assert run_inproc(args, {"LEDGER_NOW": f"2026-11-{day:02d}T12:00:00Z"}).code == 0
    return home


def _segment_files(home: Path) -> dict[int, bytes]:
    return {n: (home / "segments" / f"{n:06d}.jsonl.zst").read_bytes() for n in SEGMENTS}


def _ledger(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ledger", "--home", str(home), *args]


def _kill_at(home: Path, target: Path, point: str, tmp_path: Path) -> None:
    """Run ``ledger archive`` until it stops at ``point``, then ``kill -9`` it."""
    fifo = tmp_path / "pause.fifo"
    os.mkfifo(fifo)
    env = clean_env(**NOW, LEDGER_ARCHIVE_PAUSE_AT=point, LEDGER_ARCHIVE_PAUSE_FIFO=str(fifo))
    argv = _ledger(home, "archive", "--before", BEFORE, "--to", str(target))
    errors = tmp_path / "archive.stderr"
    with errors.open("wb") as stderr:
        child = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        reached = b""
        deadline = time.monotonic() + _GIVE_UP_S
        while not reached and child.poll() is None and time.monotonic() < deadline:
            try:
                reached = os.read(reader, 100)
            except BlockingIOError:  # the child has the FIFO open and has not written yet
                reached = b""
            time.sleep(0.01)
        assert reached == point.encode(), (point, child.poll(), errors.read_text())
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
    finally:
        os.close(reader)
        if child.poll() is None:
            child.kill()
            child.wait()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _ledger(home, *args), cwd=REPO, env=clean_env(**NOW), capture_output=True, text=True,
        check=False,
    )  # fmt: skip


def _budgets(home: Path) -> object:
    done = _cli(home, "budgets", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _nothing_lost(home: Path, target: Path, originals: dict[int, bytes]) -> None:
    """Each segment's file is in the home or the archive, as it was sealed."""
    for number, data in originals.items():
        name = f"{number:06d}.jsonl.zst"
        places = [p for p in (home / "segments" / name, target / name) if p.exists()]
        assert places, f"segment {number} is in neither the home nor the archive"
        for place in places:
            assert place.read_bytes() == data, f"{place} changed"
        assert (home / "segments" / f"{number:06d}.json").exists()


def _verifies(home: Path, target: Path) -> None:
    for extra in (("--full", "--archive", str(target)), ("--archive", str(target)), ()):
        done = _cli(home, "verify-chain", "--json", *extra)
        assert done.returncode == 0, (extra, done.stdout, done.stderr)
        assert json.loads(done.stdout) == {"ok": True, "entries": 10, "line": None, "reason": None}


@pytest.mark.parametrize("point", POINTS)
def test_kill_9_at_a_crash_point_loses_nothing_and_a_second_run_finishes(
    dated_home: Path, tmp_path: Path, point: str
):
    target = tmp_path / "cold"
    originals = _segment_files(dated_home)
    budgets = _budgets(dated_home)
    _kill_at(dated_home, target, point, tmp_path)
    _nothing_lost(dated_home, target, originals)
    _verifies(dated_home, target)
    assert _budgets(dated_home) == budgets
    again = _cli(dated_home, "archive", "--before", BEFORE, "--to", str(target))
    assert again.returncode == 0, again.stderr
    for number, data in originals.items():
        name = f"{number:06d}.jsonl.zst"
        assert not (dated_home / "segments" / name).exists(), f"segment {number} still home"
        assert (target / name).read_bytes() == data
        assert (target / f"{number:06d}.json").exists()
    archived = set()
    for path in (dated_home / "segments").glob("archive-*.json"):
        archived |= {item["segment"] for item in json.loads(path.read_text())["segments"]}
    assert archived == set(SEGMENTS)  # every segment named by a signed archive manifest
    _verifies(dated_home, target)
    assert _budgets(dated_home) == budgets
    assert not list(target.glob(".*.tmp")), "a temporary file left in the archive"
