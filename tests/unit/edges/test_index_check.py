"""The whole-index check ``rebuild-state`` runs reads its rows as a stream and misses no damage."""

import sqlite3
from pathlib import Path

import pytest

from ledger.edges.files.indexconn import forget
from ledger.edges.files.indexdb import IndexDb, Position
from ledger.errors import StateMismatchError

KEY = b"k" * 32


def _index(tmp_path: Path, refs: int = 5) -> IndexDb:
    index = IndexDb(tmp_path / "index.sqlite3", KEY)
    with index.writing() as tx:
        tx.set_meta(1, 1)
        tx.add_refs((f"{n:064x}", Position(0, n, n * 100)) for n in range(1, refs + 1))
    return index


def _sql(index: IndexDb, statement: str) -> None:
    forget(index.path)
    with sqlite3.connect(index.path) as db:
        db.execute(statement)
    forget(index.path)


def test_a_sound_index_checks(tmp_path: Path) -> None:
    _index(tmp_path).check_all()


def test_an_index_never_written_checks(tmp_path: Path) -> None:
    IndexDb(tmp_path / "index.sqlite3", KEY).check_all()


@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM refs WHERE entry = 3",  # a row removed from the middle
        "DELETE FROM refs WHERE entry = 5",  # the last row removed
        "DELETE FROM refs WHERE k = x''",  # the head removed
        "UPDATE refs SET offset = 7 WHERE entry = 2",  # a row edited
        "INSERT INTO refs VALUES (x'00ff', NULL, 0, 9, 9, x'00')",  # a row added
    ],
)
def test_damage_anywhere_is_found(tmp_path: Path, damage: str) -> None:
    index = _index(tmp_path)
    _sql(index, damage)
    with pytest.raises(StateMismatchError):
        index.check_all()
