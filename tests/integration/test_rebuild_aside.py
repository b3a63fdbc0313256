"""``rebuild-state`` folds beside the live state, without the chain lock (SPEC §21).

Verdicts from another process are decided while the whole chain is folded
aside; a rebuild killed anywhere leaves a home whose verdicts, verification and
figures are those of a fresh fold; its memory does not grow with the chain; and
a key rotation's next verdict folds nothing, while a revocation still makes the
next one verify the chain again.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.edges.files.asidestate import aside_of
from ledger.runtime import Runtime
from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

# After the entries' fixed past day: they may be unsigned (before ``strict_after``).
NOW = "2026-11-23T10:00:00Z"
ENTRIES = 7_000  # more than one batch of index records spilled (``SPILL_EVERY``)


def _ledger(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        env=clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, check=False,
    )  # fmt: skip


def _verdict(home: Path) -> subprocess.CompletedProcess[str]:
    return _ledger(home, "verdict", "0.01", "--provider", "openai")


def _figures(home: Path) -> str:
    """What ``status`` shows: the spend counted, per scope."""
    result = _ledger(home, "status")
    assert result.returncode == 0, result.stderr
    return result.stdout


def _fresh_figures(home: Path, tmp: Path) -> str:
    """``status`` of a copy of the home whose derived state is folded afresh."""
    copy = tmp / "fresh"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(home, copy)
    shutil.rmtree(copy / "state")
    return _figures(copy)


def _built(tmp: Path, entries: int = ENTRIES, lock_timeout: int | None = None) -> Path:
    home = tmp / "home"
    tmp.mkdir(parents=True, exist_ok=True)
    init = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), "init", "--daily-cap-usd", "1000"],
        env=clean_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    append_entries(home, entries, clean_env(), signed=False)
    if lock_timeout is not None:
        config = home / "ledger.toml"
        text = config.read_text()
        text = re.sub(
            r"(?m)^lock_timeout_seconds = .*$", f"lock_timeout_seconds = {lock_timeout}", text
        )
        assert f"lock_timeout_seconds = {lock_timeout}" in text
        config.write_text(text)
    assert _verdict(home).returncode == 0  # the live state, folded once
    return home


def test_a_verdict_in_another_process_is_decided_while_the_chain_is_folded_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Halfway through the fold from line 1, a verdict is decided, and the rebuilt state has it."""
    # A verdict waits one second for the lock: the whole fold under it would refuse it.
    home = _built(tmp_path, lock_timeout=1)
    from ledger.edges.files.chainfile import ChainFile
    from ledger.services.billing.reconcile import rebuild_state

    decided: list[subprocess.CompletedProcess[str]] = []
    original = ChainFile.iter_lines

    def iter_lines(self: ChainFile, start: int = 0, end: int | None = None) -> Any:
        for number, line in enumerate(original(self, start, end)):
            if start == 0 and number == ENTRIES // 2 and not decided:
                decided.append(_verdict(home))  # halfway through the fold from line 1
            yield line

    monkeypatch.setattr(ChainFile, "iter_lines", iter_lines)
    for key in [k for k in os.environ if k.startswith("LEDGER_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("LEDGER_NOW", NOW)
    runtime = Runtime(home, dict(os.environ))
    outcome = rebuild_state(runtime, aside_of(runtime.states))
    monkeypatch.setattr(ChainFile, "iter_lines", original)

    assert decided, "the fold never reached its middle"
    assert decided[0].returncode == 0, decided[0].stderr
    # Both verdicts and the rebuild's own entry are in the rebuilt state.
    assert outcome.entries == ENTRIES + 2
    assert _figures(home) == _fresh_figures(home, tmp_path)
    assert not (home / "state" / "rebuild").exists()
    assert _ledger(home, "verify-chain").returncode == 0


# Where a rebuild is killed: what is patched in the child to kill itself there.
_KILL_AT = {
    # After the first batch of index records was written aside.
    "fold": "asidestate.AsideState.spill",
    # The state aside is whole and caught up; nothing swapped yet.
    "before-swap": "asidestate.AsideState.swap_in",
    # The live state file removed, the new one not in yet.
    "mid-swap": "asidestate.fsync_dir",
    # Swapped in; the aside folder not cleared yet.
    "after-swap": "asidestate.AsideState.clear#2",
}

_CHILD = """
import os, signal, sys
from ledger.edges.files import asidestate
target, _, nth = sys.argv[1].partition("#")
owner, _, name = target.removeprefix("asidestate.").rpartition(".")
holder = getattr(asidestate, owner) if owner else asidestate
original = getattr(holder, name)
calls = [0]
def killing(*args, **kwargs):
    calls[0] += 1
    if calls[0] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(holder, name, killing)
from ledger.cli import main
sys.argv = ["ledger", "--home", sys.argv[2], "rebuild-state"]
main()
"""


@pytest.mark.parametrize("point", list(_KILL_AT))
def test_a_rebuild_killed_anywhere_leaves_the_figures_of_a_fresh_fold(
    tmp_path: Path, point: str
) -> None:
    """Killed during the fold aside, before, inside or after the swap: nothing lost or doubled."""
    home = _built(tmp_path)
    before = _figures(home)
    killed = subprocess.run(
        [sys.executable, "-c", _CHILD, _KILL_AT[point], str(home)],
        env=clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if point in ("fold", "before-swap"):
        assert _figures(home) == before  # the live state untouched
    assert _verdict(home).returncode == 0
    assert _figures(home) == _fresh_figures(home, tmp_path)
    assert _ledger(home, "verify-chain").returncode == 0
    rebuilt = _ledger(home, "rebuild-state")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert _figures(home) == _fresh_figures(home, tmp_path)


SHORT, LONG = 2_000, 50_000
# Far below what holding the long chain's refs and rows costs (a fold holding
# them, or a check of the live index holding its rows, grows 15 to 29 MiB from the
# short home to the long one), above the noise of a process's start-up and
# of SQLite's page caches (bounded).
CONSTANT_KIB = 8 * 1024

# Rebuilds the state of the home it is given, beside the live one. The
# report's rollups, which ``rebuild-state`` folds afterwards, are measured by
# their own benchmarks.
_REBUILD = """
import os, sys
from pathlib import Path
from ledger.edges.files.asidestate import aside_of
from ledger.runtime import Runtime
from ledger.services.billing.reconcile import rebuild_state
runtime = Runtime(Path(sys.argv[1]), dict(os.environ))
rebuild_state(runtime, aside_of(runtime.states))
"""

# Runs the rebuild as its only child and prints that child's peak memory
# (KiB): a child of this small process, so it inherits no larger peak.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _rebuild_peak_kib(home: Path) -> int:
    measured = subprocess.run(
        [sys.executable, "-c", _MEASURE, sys.executable, "-c", _REBUILD, str(home)],
        env=clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, check=True,
    )  # fmt: skip
    code, peak = measured.stdout.split()
    assert code == "0", measured.stderr
    return int(peak)


def test_a_rebuild_s_memory_is_flat_in_the_chain_length(tmp_path: Path) -> None:
    """Peak memory rebuilding 50,000 entries within a constant of rebuilding 2,000."""
    short = _rebuild_peak_kib(_built(tmp_path / "short", SHORT))
    long = _rebuild_peak_kib(_built(tmp_path / "long", LONG))
    assert long - short <= CONSTANT_KIB, (short, long)


def test_a_state_kept_in_memory_by_a_resident_process_gives_way_to_the_rebuilt_one(
    tmp_path: Path,
) -> None:
    """``ledger serve`` and the resident gate keep their newest state in memory (``keptstate``)."""
    from ledger.edges.files.keptstate import KeptStates, keeping
    from ledger.edges.files.statefile import StateFile

    home = _built(tmp_path, 3_000)
    states = Runtime(home, clean_env(LEDGER_NOW=NOW)).states
    assert isinstance(states, StateFile)
    stored = states.load()
    assert stored is not None
    kept = KeptStates()
    with keeping(kept):
        # A save held in memory, not written yet when the rebuild swaps its state in.
        states.save_state(stored.head_hash, stored.size, {**stored.data, "held": True})
    rebuilt = _ledger(home, "rebuild-state")
    assert rebuilt.returncode == 0, rebuilt.stderr
    kept.write()  # the resident's periodic write: the file changed under it, so not written
    with keeping(kept):
        after = states.load()
    assert after is not None
    assert "held" not in after.data
    assert after.size > stored.size  # the rebuild's own entry folded in
    assert _verdict(home).returncode == 0
    assert _figures(home) == _fresh_figures(home, tmp_path)


def _verdict_peak_kib(home: Path) -> int:
    shutil.rmtree(home / "state")  # missing: the verdict folds it afresh, under the lock
    argv = [sys.executable, "-m", "ledger", "--home", str(home), "verdict", "0.01"]
    measured = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv, "--provider", "openai"],
        env=clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, check=True,
    )  # fmt: skip
    code, peak = measured.stdout.splitlines()[-1].split()  # after the verdict's JSON
    assert code == "0", measured.stderr
    return int(peak)


def test_a_verdict_folding_a_missing_state_holds_no_more_memory_for_a_longer_chain(
    tmp_path: Path,
) -> None:
    """A state missing is folded under the lock; its index records are written as they come.

    Held until the state was saved, they grew with the chain: 3 GiB at ten
    million entries.
    """
    short = _verdict_peak_kib(_built(tmp_path / "short", SHORT))
    # 100,000: held, the records and the pages mapped took 31 MiB more than at 2,000.
    long = _verdict_peak_kib(_built(tmp_path / "long", 2 * LONG))
    assert long - short <= CONSTANT_KIB, (short, long)
