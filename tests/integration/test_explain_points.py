"""explain REF folds from the nearest kept point of the derived state, not from line 1.

The points are kept every ``POINT_EVERY`` entries (made small here) by the
folds of the derived state: a rebuild, a catch-up and the verdicts' own saves.
An explanation that starts from one is the same, to the byte, as one folded
from line 1 (the points removed), and reads only the lines after the point.
"""

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from ledger.edges.files.chainfile import ChainFile
from ledger.services.chain import state
from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

ENTRIES = 3_000  # two minutes apart: 2026-11-22 08:00 to 2026-11-26 11:58
NOW = {"LEDGER_NOW": "2026-11-26T12:30:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}
BUDGETS = [
    {"name": "team", "usd": 50, "period": "day"},
    {"name": "week", "usd": 500, "period": "week"},
]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    read: list[bytes] = []
    inner = ChainFile.iter_lines

    def counting(self: ChainFile, start: int = 0, end: int | None = None):
        for raw in inner(self, start, end):
            read.append(raw)
            yield raw

    monkeypatch.setattr(ChainFile, "iter_lines", counting)
    return read


def _explained(run_inproc, home: Path, ref: str, env: dict[str, str]) -> str:
    result = run_inproc(["--home", str(home), "explain", ref, "--json"], env=env)
    assert result.code in (0, 1), result.stderr
    return str(result.stdout)


def _verdicts(run_inproc, home: Path, env: dict[str, str], count: int) -> list[str]:
    refs = []
    for usd in ("1", "30", "2", "40", "3")[:count]:
        result = run_inproc(["--home", str(home), "verdict", usd, "--provider", "openai"], env=env)
        assert result.code in (0, 1), result.stderr
        refs.append(result.json()["verdict_ref"])
    return refs


@pytest.mark.parametrize("budgets", [[], BUDGETS], ids=["caps", "budgets"])
def test_explain_starts_from_the_nearest_point_and_says_what_line_1_would(
    home: Path, run_inproc, monkeypatch: pytest.MonkeyPatch, budgets
):
    """Points at every 500 entries of the first rebuild; the newest verdict's explanation
    reads the lines after the 3000th and equals the one folded from line 1."""
    monkeypatch.setattr(state, "POINT_EVERY", 500)
    env = {**NOW, "LEDGER_BUDGETS": json.dumps(budgets)}
    append_entries(home, ENTRIES, clean_env(), step=dt.timedelta(minutes=2))
    refs = _verdicts(run_inproc, home, env, 5)
    points = sorted(path.name for path in (home / "state" / "points").iterdir())
    assert points == [f"{n:012d}.json" for n in range(500, ENTRIES + 1, 500)]

    read = _counting(monkeypatch)
    from_points = [_explained(run_inproc, home, ref, env) for ref in refs]
    assert len(read) < 5 * 20, len(read)  # the index's lookups and the few lines after 3000

    shutil.rmtree(home / "state" / "points")
    read.clear()
    from_line_1 = [_explained(run_inproc, home, ref, env) for ref in refs]
    assert len(read) > 5 * ENTRIES
    assert from_points == from_line_1
    assert json.loads(from_points[-1])["line"] == ENTRIES + 5


def test_a_point_is_kept_by_a_verdict_and_not_used_under_other_budgets(
    home: Path, run_inproc, monkeypatch: pytest.MonkeyPatch
):
    """A verdict that seals the point's entry keeps one; budgets changed since: line 1."""
    monkeypatch.setattr(state, "POINT_EVERY", ENTRIES + 2)
    append_entries(home, ENTRIES, clean_env(), step=dt.timedelta(minutes=2))
    refs = _verdicts(run_inproc, home, NOW, 4)
    points = sorted(path.name for path in (home / "state" / "points").iterdir())
    assert points == [f"{ENTRIES + 2:012d}.json"]
    read = _counting(monkeypatch)
    kept = _explained(run_inproc, home, refs[-1], NOW)
    assert len(read) < 20, len(read)

    other = {**NOW, "LEDGER_BUDGETS": json.dumps(BUDGETS)}
    read.clear()
    changed = _explained(run_inproc, home, refs[-1], other)
    assert len(read) > ENTRIES
    shutil.rmtree(home / "state" / "points")
    assert changed == _explained(run_inproc, home, refs[-1], other)
    assert kept == _explained(run_inproc, home, refs[-1], NOW)
