"""Group commit on the chain file (``ledger.edges.files.groupcommit``): one lock hold, one fsync."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.groupcommit import GroupCommitError, group_commit, lock_released, sync_chain
from ledger.errors import LockTimeoutError
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer

FLOCK_PROBE = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "try:\n"
    "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "except BlockingIOError:\n"
    "    sys.exit(1)\n"
    "sys.exit(0)\n"
)


HOLD_LOCK = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


def _payload(index: int) -> dict[str, object]:
    return {
        "provider": "openai",
        "actual_micros": index,
        "utc_day": "2026-11-22",
        "verdict_ref": None,
        "settled": False,
        "cycle_id": f"g-{index}",
    }


def _chain(home: Path) -> ChainFile:
    return ChainFile(home / "events.jsonl")


def _writer(home: Path) -> Writer:
    return Writer(Runtime(home, {"LEDGER_NOW": "2026-11-22T08:00:00Z"}))


def _append(writer: Writer, chain: ChainFile, index: int) -> None:
    with chain.transaction() as tx:
        writer.append(tx, "budget.record_call", _payload(index))


class ChainFsyncs:
    """Counts fsyncs of the chain file (a spy: the real fsync still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, chain: Path) -> None:
        self.count = 0
        self._chain = chain
        self._real = os.fsync
        monkeypatch.setattr(os, "fsync", self)

    def __call__(self, fd: int) -> None:
        if self._chain.exists() and os.fstat(fd).st_ino == self._chain.stat().st_ino:
            self.count += 1
        self._real(fd)


class TestGroupCommit:
    def test_appends_in_a_group_are_fsynced_once_at_its_end(self, home, monkeypatch):
        """Five transactions in a group: no chain fsync until the group ends, then one."""
        writer = _writer(home)
        chain = _chain(home)
        _append(writer, chain, 0)  # the chain exists before the spy starts
        fsyncs = ChainFsyncs(monkeypatch, chain.path)
        with group_commit(chain):
            for index in range(1, 6):
                _append(writer, chain, index)
            assert fsyncs.count == 0
        assert fsyncs.count == 1
        for index in range(6, 9):
            _append(writer, chain, index)
        assert fsyncs.count == 4  # outside a group: one per append, as before
        assert len(chain.path.read_bytes().splitlines()) == 9

    def test_a_group_holds_the_lock_from_start_to_end(self, home):
        """Another process cannot take the chain lock while a group runs, and can after."""
        chain = _chain(home)
        probe = [sys.executable, "-c", FLOCK_PROBE, str(chain.lock_path)]
        with group_commit(chain):
            _append(_writer(home), chain, 0)
            assert subprocess.run(probe, check=False).returncode == 1
        assert subprocess.run(probe, check=False).returncode == 0

    def test_lock_released_lets_others_in_and_takes_the_lock_back(self, home, monkeypatch):
        """Inside a group, lock_released makes the appends so far durable, lets another
        process take the lock for the block, and holds it again after it."""
        chain = _chain(home)
        writer = _writer(home)
        _append(writer, chain, 0)
        probe = [sys.executable, "-c", FLOCK_PROBE, str(chain.lock_path)]
        fsyncs = ChainFsyncs(monkeypatch, chain.path)
        with group_commit(chain):
            _append(writer, chain, 1)
            with lock_released(chain.lock_path):
                assert fsyncs.count == 1
                assert subprocess.run(probe, check=False).returncode == 0
            assert subprocess.run(probe, check=False).returncode == 1
            _append(writer, chain, 2)
        assert fsyncs.count == 2
        assert len(chain.path.read_bytes().splitlines()) == 3

    def test_lock_released_outside_a_group_changes_nothing(self, home, monkeypatch):
        """No group: nothing is held across transactions, nothing to release or fsync."""
        chain = _chain(home)
        _append(_writer(home), chain, 0)
        fsyncs = ChainFsyncs(monkeypatch, chain.path)
        with lock_released(chain.lock_path):
            pass
        assert fsyncs.count == 0

    def test_a_transaction_on_another_chain_keeps_its_own_lock_and_fsync(
        self, home, tmp_path, run_inproc, monkeypatch
    ):
        """Only the group's own chain (same lock file inode) joins it."""
        other = tmp_path / "other"
        assert run_inproc(["--home", str(other), "init", "--daily-cap-usd", "5"]).code == 0
        other_chain = _chain(other)
        _append(_writer(other), other_chain, 0)
        fsyncs = ChainFsyncs(monkeypatch, other_chain.path)
        with group_commit(_chain(home)):
            _append(_writer(other), other_chain, 1)
            assert fsyncs.count == 1

    def test_reads_and_writes_of_the_same_chain_join_by_identity(self, home):
        """A read view and a differently spelled path join the group (no self-deadlock)."""
        chain = _chain(home)
        same = ChainFile(home / ".." / home.name / "events.jsonl", lock_timeout=0.2)
        with group_commit(chain):
            _append(_writer(home), chain, 0)
            with same.read_transaction() as view:
                head = view.head()
            _append(_writer(home), same, 1)
        assert head is not None
        assert len(chain.path.read_bytes().splitlines()) == 2

    def test_a_group_that_cannot_lock_fails_each_transaction_as_a_lock_timeout(self, home):
        """The lock held elsewhere: each transaction fails as its own wait would have."""
        chain = ChainFile(home / "events.jsonl", lock_timeout=0.1)
        _append(_writer(home), chain, 0)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(chain.lock_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline() == "held\n"
            with group_commit(chain) as group:
                assert group.held is False
                with pytest.raises(LockTimeoutError, match=r"still held after 0\.1 s"):
                    _append(_writer(home), chain, 1)
        finally:
            holder.communicate("")
        assert len(chain.path.read_bytes().splitlines()) == 1

    def test_a_failed_final_fsync_removes_the_groups_entries(self, home, monkeypatch):
        """fsync fails at the end (EIO injected: a disk error cannot be made on demand
        here): the chain is cut back to where the group found it, and it says so."""
        writer = _writer(home)
        chain = _chain(home)
        _append(writer, chain, 0)
        before = chain.path.read_bytes()
        real = os.fsync
        calls = {"n": 0}

        def failing_once(fd: int) -> None:
            calls["n"] += 1
            if calls["n"] == 1:
                raise OSError(errno.EIO, "Input/output error")
            real(fd)

        with pytest.raises(GroupCommitError, match="not recorded"):  # noqa: PT012
            with group_commit(chain):
                _append(writer, chain, 1)
                _append(writer, chain, 2)
                monkeypatch.setattr(os, "fsync", failing_once)
        assert chain.path.read_bytes() == before

    def test_sync_chain_makes_a_missing_chain_no_error(self, tmp_path):
        """Nothing written yet: nothing to make durable."""
        sync_chain(ChainFile(tmp_path / "events.jsonl"))


def test_the_trust_store_is_read_once_per_hold_and_again_after_it_is_saved(home: Path):
    """Under the lock only its holder replaces the trust store: one read serves the hold."""
    runtime = Runtime(home)
    keys = runtime.keys
    trust_path = keys.trust_path
    original = trust_path.read_bytes()
    chain = runtime.chain
    assert isinstance(chain, ChainFile)
    with group_commit(chain) as group:
        first = keys.load_trust()
        trust_path.write_bytes(b"not json\n")  # an edit outside the lock's rules...
        assert keys.load_trust() is first  # ...is not read again during the hold
        keys.save_trust(first)  # the holder itself replacing it is
        assert keys.load_trust() == first
        trust_path.write_bytes(b"not json\n")
        group.let_go()  # another writer may change anything once the lock is let go
        assert not group.memo
    trust_path.write_bytes(original)
    assert keys.load_trust() == first
