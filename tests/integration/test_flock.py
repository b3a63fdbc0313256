"""Concurrent appends: the chain lock makes four writers' entries one valid chain."""

import itertools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO, clean_env

WORKERS = 4
PER_WORKER = 500


def _start(home: Path, worker: int, go: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.append_worker", "batch", str(home), str(worker),
         str(PER_WORKER), str(go)],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def test_four_processes_append_concurrently(run_inproc, home, tmp_path):
    """4 processes x 500 appends at once give one chain of 2000 entries: no gap, no loss,
    each writer's entries in its own order, every acknowledged hash present."""
    go = tmp_path / "go"
    procs = [_start(home, worker, go) for worker in range(WORKERS)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", proc.stderr
        go.touch()
        outputs = [proc.communicate(timeout=180) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err

    result = run_inproc(["--home", str(home), "verify-chain"])
    assert (result.code, result.stdout, result.stderr) == (
        0,
        f"OK {WORKERS * PER_WORKER} entries\n",
        "",
    )

    lines = (home / "events.jsonl").read_bytes().splitlines()
    assert len(lines) == WORKERS * PER_WORKER
    from ledger.core.envelope import parse_line

    parsed = [parse_line(raw) for raw in lines]
    hashes = {entry.entry_hash for entry in parsed}
    assert len(hashes) == len(parsed)
    for out, _err in outputs:
        acknowledged = out.splitlines()
        assert len(acknowledged) == PER_WORKER
        assert set(acknowledged) <= hashes

    sequences: dict[str, list[int]] = defaultdict(list)
    for entry in parsed:
        worker, index = entry.payload["cycle_id"].split("-")
        sequences[worker].append(int(index))
    assert sorted(sequences) == [f"w{n}" for n in range(WORKERS)]
    for worker, indexes in sequences.items():
        assert indexes == list(range(PER_WORKER)), f"{worker} lost or reordered entries"

    switches = sum(
        1
        for before, after in itertools.pairwise(parsed)
        if before.payload["cycle_id"].split("-")[0] != after.payload["cycle_id"].split("-")[0]
    )
    assert switches > WORKERS, f"writers never interleaved ({switches} switches): not a race"
    timestamps = [entry.ts_utc for entry in parsed]
    assert timestamps == sorted(timestamps), "sealed times went backwards"
