"""A change of ``[[budgets]]`` counts only the budgets it changed, and never from the chain
when the rollups hold the facts of a calendar budget's period.

On a home whose rollups are current (the daemon, the gateway and ``ledger
serve`` keep them so), a new day, week or month budget is counted from the
budget facts in O(cells); a raised cap counts nothing; whatever the facts
cannot answer exactly (a rolling window, rows that fail their MAC, rollups far
behind) is folded from the chain as before. Every way comes out exactly as a
rebuild from line 1 counts it.
"""

import datetime as dt
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.runtime import Runtime
from ledger.services.chain.counter import Counter
from ledger.services.chain.state import load_counter, save_counter
from ledger.services.views.rollups import catch_up
from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

ENTRIES = 3_000  # two minutes apart: 2026-11-22 08:00 to 2026-11-26 12:00
NOW = {"LEDGER_NOW": "2026-11-26T12:30:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}
DAY = '\n[[budgets]]\nname = "daily"\nusd = 5\nperiod = "day"\n'
CALENDAR = (
    '\n[[budgets]]\nname = "monthly"\nusd = 900\nperiod = "month"\nper = "agent"\n'
    '\n[[budgets]]\nname = "openai-week"\nusd = 90\nperiod = "week"\nmatch = { provider = "openai" }\n'
)
ROLLING = '\n[[budgets]]\nname = "last-6h"\nusd = 90\nperiod = "rolling:6h"\n'


def _load(home: Path) -> Counter:
    """The counter, loaded and saved as a verdict would."""
    runtime = Runtime(home, {**clean_env(), **NOW})
    with runtime.chain.transaction() as tx:
        counter = load_counter(tx, runtime)
        save_counter(counter, runtime.states)
    assert counter.problem is None, counter.problem
    return counter


def _plain(counter: Counter) -> str:
    return json.dumps(counter.data["budgets"], sort_keys=True, default=dict)


def _as_rebuilt(home: Path, counter: Counter) -> None:
    """``counter``'s budgets are what a rebuild from line 1 counts.

    Its counters are read (they are read from the index when asked) before
    the rebuild replaces the index.
    """
    counted = json.loads(_plain(counter))
    (home / "state" / "derived.json").unlink()
    rebuilt = json.loads(_plain(_load(home)))
    for part in sorted(set(rebuilt) | set(counted)):
        assert rebuilt.get(part) == counted.get(part), (part, rebuilt.get(part), counted.get(part))


def _calls(home: Path, run_inproc: Any, agents: str) -> None:
    """A settled call per agent (on openai), and one record with no verdict."""
    h = ["--home", str(home)]
    for agent in agents:
        common = ["--agent", agent, "--provider", "openai"]
        verdict = run_inproc([*h, "verdict", "0.02", *common], env=NOW)
        assert verdict.code == 0, verdict.stderr
        ref = verdict.json()["verdict_ref"]
        record = run_inproc([*h, "record", "0.015", "--verdict-ref", ref, *common], env=NOW)
        assert record.code == 0, record.stderr
    assert (
        run_inproc([*h, "record", "0.04", "--agent", "solo", "--provider", "x"], env=NOW).code == 0
    )


def _busy_home(home: Path, run_inproc: Any) -> None:
    """Four days of calls, a few agents' settled calls, an open verdict."""
    append_entries(home, ENTRIES, clean_env(), step=dt.timedelta(minutes=2))
    config = home / "ledger.toml"
    config.write_text(config.read_text() + DAY)
    h = ["--home", str(home)]
    assert run_inproc([*h, "verdict", "0.01"], env=NOW).code == 0  # the state, from line 1
    _calls(home, run_inproc, "abc")
    assert run_inproc([*h, "verdict", "0.03", "--agent", "open"], env=NOW).code == 0


@pytest.fixture
def busy(home: Path, run_inproc: Any) -> Path:
    """A busy home (``_busy_home``) whose rollups are current."""
    _busy_home(home, run_inproc)
    caught = catch_up(Runtime(home, clean_env()))
    assert caught.entries == ENTRIES + 9
    return home


@pytest.fixture
def refolds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The entries each fold of budgets from the chain read."""
    from ledger.services.chain import budget_refold

    found: list[int] = []
    refold = budget_refold.refold_budgets

    def spying(*args: Any, **kwargs: Any) -> Any:
        answer = refold(*args, **kwargs)
        found.append(-1 if answer is None else answer[1])
        return answer

    monkeypatch.setattr(budget_refold, "refold_budgets", spying)
    return found


def _add(home: Path, text: str) -> None:
    config = home / "ledger.toml"
    config.write_text(config.read_text() + text)


def test_new_calendar_budgets_are_counted_from_the_facts_as_a_rebuild_counts_them(
    busy: Path, refolds: list[int], run_inproc: Any
):
    _add(busy, CALENDAR)
    result = run_inproc(["--home", str(busy), "verdict", "0.01", "--agent", "b"], env=NOW)
    assert result.code == 0, result.stderr
    assert refolds == []  # nothing read from the chain
    counted = _load(busy)
    assert counted.refolded is None  # kept: the next load counts nothing again
    tables = counted.data["budgets"]["by_name"]
    assert set(tables) == {"daily", "monthly", "openai-week"}
    _as_rebuilt(busy, counted)


def test_a_raised_cap_counts_nothing(busy: Path, refolds: list[int]):
    before = _plain(_load(busy))
    config = busy / "ledger.toml"
    config.write_text(config.read_text().replace("usd = 5\n", "usd = 50\n"))
    changed = _load(busy)
    assert (changed.refolded, refolds) == (0, [])
    assert _plain(changed) == before.replace(_fingerprint(before), _fingerprint(_plain(changed)))


def _fingerprint(plain: str) -> str:
    return str(json.loads(plain)["fingerprint"])


def test_a_rolling_window_alone_is_folded_from_the_chain(busy: Path, refolds: list[int]):
    _add(busy, CALENDAR + ROLLING)
    changed = _load(busy)
    assert len(refolds) == 1
    assert 0 < refolds[0] < ENTRIES // 10  # six hours and a margin, not four days
    _as_rebuilt(busy, changed)


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE budget_cells SET micros = micros - 1000",
        "DELETE FROM budget_cells WHERE r_slot = (SELECT max(r_slot) FROM budget_cells)",
        "DELETE FROM budget_pending",
    ],
    ids=["edited", "deleted", "reservation-dropped"],
)
def test_facts_that_fail_their_check_are_not_used(busy: Path, refolds: list[int], tamper: str):
    rollups = busy / "state" / "rollups.sqlite3"
    with sqlite3.connect(rollups) as db:
        assert db.execute(tamper).rowcount > 0
    _add(busy, CALENDAR)
    changed = _load(busy)
    assert len(refolds) == 1
    assert refolds[0] > ENTRIES // 2  # November, from the chain
    _as_rebuilt(busy, changed)


def test_rollups_a_little_behind_are_caught_up_to_the_state(
    busy: Path, refolds: list[int], run_inproc: Any
):
    _calls(busy, run_inproc, "defgh")  # the state moves on, the rollups do not
    _add(busy, CALENDAR)
    changed = _load(busy)
    assert refolds == []
    assert catch_up(Runtime(busy, clean_env())).folded == 0  # brought to the state's head
    _as_rebuilt(busy, changed)


def test_rollups_far_behind_are_not_used(
    busy: Path, refolds: list[int], run_inproc: Any, monkeypatch: pytest.MonkeyPatch
):
    from ledger.services.views import budget_facts_at

    monkeypatch.setattr(budget_facts_at, "MAX_LAG", 5)
    _calls(busy, run_inproc, "defgh")  # 16 entries the rollups have not folded
    _add(busy, CALENDAR)
    changed = _load(busy)
    assert len(refolds) == 1
    _as_rebuilt(busy, changed)


# Kills ``ledger report`` as the rollups' budget facts are written (``before``:
# as the first write begins; ``after``: once it has written, before the commit).
_KILLED_REPORT = """
import os, signal, sys
from ledger.edges.files.budgetfacts import BudgetFactsTable
write = BudgetFactsTable.write
def killing(self, *args, **kwargs):
    if sys.argv[1] == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    answer = write(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
    return answer
BudgetFactsTable.write = killing
from ledger.cli import main
sys.argv = ["ledger", "--home", sys.argv[2], "report", "--month", "2026-11"]
main()
"""


@pytest.mark.parametrize("point", ["before", "after"])
def test_a_kill_while_the_facts_are_written_loses_and_doubles_nothing(
    home: Path, run_inproc: Any, refolds: list[int], point: str
):
    _busy_home(home, run_inproc)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_REPORT, point, str(home)],
        env={**clean_env(), **NOW}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert catch_up(Runtime(home, clean_env())).entries == ENTRIES + 9  # folded afresh
    _add(home, CALENDAR)
    changed = _load(home)
    assert refolds == []  # the facts whole: counted from them
    _as_rebuilt(home, changed)
