"""A resident process checkpoints the derived index off its call path, and keeps the WAL bounded."""

import itertools
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ledger.edges.files import walcheckpoints
from ledger.edges.files.indexconn import connect
from ledger.edges.files.indexdb import IndexDb, Position

KEY = b"k" * 32
REPO = Path(__file__).resolve().parents[3]


def _write(index: IndexDb, first: int, count: int) -> None:
    """``count`` commits of one ref each, as the call path makes them."""
    for n in range(first, first + count):
        with index.writing() as tx:
            tx.add_refs([(f"{n:064x}", Position(0, n, n * 100))])


def _frames(path: Path) -> int:
    """Pages the WAL holds now (a PASSIVE checkpoint of nothing new reports them)."""
    with sqlite3.connect(path) as db:
        _busy, frames, _copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(frames)


_AUTOCHECKPOINT = """
import sys
from pathlib import Path
from ledger.edges.files.indexconn import connect
from ledger.edges.files.indexdb import IndexDb
from ledger.runtime import serving_many_calls
if sys.argv[2] == "resident":
    serving_many_calls()
index = IndexDb(Path(sys.argv[1]), b"k" * 32)
with index.writing() as tx:
    tx.set_meta(1, 1)
print(connect(index.path).connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
"""


@pytest.mark.parametrize(("kind", "pages"), [("resident", "0"), ("one-shot", "1000")])
def test_only_a_resident_process_leaves_checkpoints_to_its_thread(
    tmp_path: Path, kind: str, pages: str
) -> None:
    # A one-shot command has no later moment: SQLite's own checkpoint every
    # thousand pages stays. A resident one runs none inside a call's commit.
    done = subprocess.run(
        [sys.executable, "-c", _AUTOCHECKPOINT, str(tmp_path / "index.sqlite3"), kind],
        capture_output=True, text=True, check=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.stdout.strip() == pages


def test_the_checkpointer_copies_what_was_committed(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    index = IndexDb(path, KEY)
    connect(index.path).connection.execute("PRAGMA wal_autocheckpoint = 0")
    _write(index, 1, 20)
    walcheckpoints._Checkpointer().pass_once()
    # The database file alone, its WAL left behind, holds every commit.
    alone = tmp_path / "alone.sqlite3"
    alone.write_bytes(path.read_bytes())
    with sqlite3.connect(alone) as db:
        assert db.execute("SELECT count(*) FROM refs").fetchone()[0] == 21


def test_the_wal_is_rewound_while_calls_keep_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PASSIVE checkpoint never rewinds the WAL: the next writer does, if it
    # finds every page copied, which a commit landing during the checkpoint
    # prevents. With calls back to back the WAL grows with every commit unless
    # the checkpointer asks for a RESTART.
    monkeypatch.setattr(walcheckpoints, "RESTART_FRAMES", 16)
    path = tmp_path / "index.sqlite3"
    index = IndexDb(path, KEY)
    connect(index.path).connection.execute("PRAGMA wal_autocheckpoint = 0")
    _write(index, 1, 1)
    commits = 3000
    writer = threading.Thread(target=_write, args=(index, 2, commits))
    checkpointer = walcheckpoints._Checkpointer()
    seen: list[int] = []
    writer.start()
    while writer.is_alive():
        checkpointer.pass_once()
        seen.append(_frames(path))
    writer.join()
    rewinds = sum(1 for before, after in itertools.pairwise(seen) if after < before)
    assert rewinds >= 1, f"never rewound: the WAL grew to {max(seen)} pages"
    assert max(seen) < commits, f"the WAL reached {max(seen)} pages in {commits} commits"
    with sqlite3.connect(path) as db:  # nothing lost by the rewinds
        assert db.execute("SELECT count(*) FROM refs").fetchone()[0] == commits + 2


def test_a_removed_index_is_not_made_again_by_the_checkpointer(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    index = IndexDb(path, KEY)
    _write(index, 1, 3)
    checkpointer = walcheckpoints._Checkpointer()
    checkpointer.pass_once()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    _write(index, 4, 1)  # the call path makes it anew: its identity is another
    Path(f"{path}").unlink()
    checkpointer.pass_once()
    assert not path.exists()
