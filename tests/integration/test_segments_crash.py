"""``kill -9`` while the open segment is being sealed: nothing lost, nothing counted twice."""

import json
import random

from ledger.core.chain import verify_lines
from ledger.edges.files.keyfiles import KeyDir
from ledger.runtime import Runtime
from tests.helpers.segments import hashes_of, seal_every
from tests.integration.test_crash import _kill_one_writer

ROUNDS = 6


def test_sigkill_during_seals_loses_nothing_and_counts_nothing_twice(home, run_inproc):
    """A writer sealing every two entries is killed six times at random moments; each time
    the whole chain verifies (or only its last line is torn), holds every acknowledged entry
    exactly once, and a later writer goes on from it."""
    seal_every(home, 2)
    rng = random.Random(20261202)
    trust = KeyDir(home).load_trust()
    acknowledged: list[str] = []
    for round_number in range(ROUNDS):
        acknowledged += _kill_one_writer(home, rng.uniform(0.05, 0.3))
        lines = list(Runtime(home, {}).chain.iter_lines())
        report = verify_lines(lines, trust)
        if not report.ok:
            assert report.line == len(lines), (round_number, report)
            assert "torn" in str(report.reason), report
            chain = home / "events.jsonl"
            data = chain.read_bytes()
            chain.write_bytes(data[: data.rfind(b"\n") + 1])  # what `recover` keeps
            lines = lines[:-1]
        present = hashes_of(lines)
        assert len(present) == len(set(present)), f"round {round_number}: an entry twice"
        missing = [h for h in acknowledged if h not in set(present)]
        assert not missing, f"round {round_number}: acknowledged entries lost: {missing[:3]}"
    assert (home / "segments" / "000002.json").exists()
    result = run_inproc(["--home", str(home), "verify-chain", "--full", "--json"])
    assert json.loads(result.stdout)["ok"] is True, result
