"""Changes of budgets and keys count only what they change, never the chain from line 1.

The rest of the derived state still holds for new budget definitions; only the
budgets' counters are counted afresh, over the entries their current periods
(and open reservations) can depend on, and they come out exactly as a full
rebuild from the chain counts them.
"""

import contextlib
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.runtime import Runtime
from ledger.services.chain.counter import Counter
from ledger.services.chain.state import load_counter, save_counter
from tests.conftest import clean_env, run_process
from tests.helpers.bighome import append_entries

ENTRIES = 3_000  # two minutes apart: a little over four days
DAY_BUDGET = '\n[[budgets]]\nname = "daily"\nusd = 5\nperiod = "day"\n'
MONTH_BUDGET = '\n[[budgets]]\nname = "monthly"\nusd = 900\nperiod = "month"\nper = "agent"\n'
NEW_BUDGETS = (
    '\n[[budgets]]\nname = "openai-6h"\nusd = 2\nperiod = "rolling:6h"\nmatch = { provider = "openai" }\n'
    '\n[[budgets]]\nname = "weekly"\nusd = 9\nperiod = "week"\n'
)


def _load(home: Path) -> Counter:
    return _load_noting_rebuild(home)[0]


def _load_noting_rebuild(home: Path) -> tuple[Counter, bool]:
    """The counter, loaded and saved as a verdict would; and whether it was rebuilt."""
    runtime = Runtime(home, clean_env())
    with runtime.chain.transaction() as tx:
        counter = load_counter(tx, runtime)
        rebuilt = counter.rebuilt
        save_counter(counter, runtime.states)
    assert counter.problem is None, counter.problem
    return counter, rebuilt


def _plain(counter: Counter) -> str:
    return json.dumps(counter.data["budgets"], sort_keys=True, default=dict)


def test_a_new_budget_is_counted_from_its_current_period_and_as_a_rebuild_counts_it(home: Path):
    append_entries(home, ENTRIES, clean_env(), step=dt.timedelta(minutes=2))
    config = home / "ledger.toml"
    config.write_text(config.read_text() + DAY_BUDGET)
    assert _load(home).refolded is None  # no state yet: folded (and verified) from line 1
    config.write_text(config.read_text() + NEW_BUDGETS)

    changed = _load(home)

    # The chain runs from Sunday 2026-11-22 08:00 to Thursday: the week's
    # budget starts on Monday, so Sunday's 480 entries (but a margin) are not read.
    assert changed.refolded is not None
    assert ENTRIES - 480 <= changed.refolded < ENTRIES
    config.write_text(config.read_text().replace('period = "week"', 'period = "day"'))
    changed = _load(home)
    assert changed.refolded is not None
    assert changed.refolded < ENTRIES // 3  # the last day's, not four days'
    assert _load(home).refolded is None  # saved: the next load counts nothing again
    refolded = _plain(changed)
    (home / "state" / "derived.json").unlink()
    rebuilt = _load(home)
    assert rebuilt.rebuilt or rebuilt.refolded is None
    assert _plain(rebuilt) == refolded


def test_a_key_rotation_rebuilds_nothing(home: Path):
    """The state verified under the old trust store is carried over: the old key
    stays valid up to the rotation, so the next load only folds what came after."""
    append_entries(home, 200, clean_env())
    assert _load_noting_rebuild(home)[1]  # the first load folds (and verifies) from line 1
    assert run_process(["--home", str(home), "keys", "rotate"]).code == 0
    after, rebuilt = _load_noting_rebuild(home)
    assert not rebuilt
    assert after.data["meta"]["entries"] == 201  # the ledger.key_rotated entry folded on top
    assert run_process(["--home", str(home), "verify-chain"]).code == 0


@pytest.mark.parametrize(
    "first",
    [["verdict", "0.01"], ["record", "0.01", "--provider", "openai"]],
    ids=["verdict", "record"],
)
def test_a_new_budget_is_counted_before_the_chain_lock_is_taken(
    home: Path, run_inproc, monkeypatch: pytest.MonkeyPatch, first: list[str]
):
    """The next verdict (or record) counts a new month's budget without holding the chain lock (other
    verdicts go on meanwhile), then saves it in a moment under the lock; the counters are a
    full rebuild's, and the verdict after counts nothing again."""
    from ledger.edges.files.chainfile import ChainFile
    from ledger.services.chain import budget_refold

    append_entries(home, ENTRIES, clean_env(), step=dt.timedelta(minutes=2))
    env = {"LEDGER_NOW": "2026-11-26T12:30:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}
    h = ["--home", str(home)]
    assert run_inproc([*h, "verdict", "0.01"], env=env).code == 0  # the state, from line 1
    held = [False]
    opened = ChainFile.transaction

    @contextlib.contextmanager
    def noting(self: ChainFile, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with opened(self, *args, **kwargs) as tx:
            held[0] = True
            try:
                yield tx
            finally:
                held[0] = False

    refolds: list[tuple[bool, int]] = []
    refold = budget_refold.refold_budgets

    def spying(*args: Any, **kwargs: Any) -> Any:
        found = refold(*args, **kwargs)
        refolds.append((held[0], -1 if found is None else found[1]))
        return found

    monkeypatch.setattr(ChainFile, "transaction", noting)
    monkeypatch.setattr(budget_refold, "refold_budgets", spying)
    config = home / "ledger.toml"
    config.write_text(config.read_text() + MONTH_BUDGET)
    result = run_inproc([*h, *first], env=env)
    assert result.code == 0, result.stderr
    assert [lock for lock, _folded in refolds] == [False]
    assert refolds[0][1] > ENTRIES // 2  # November's entries: most of the chain
    assert run_inproc([*h, "verdict", "0.01"], env=env).code == 0
    assert len(refolds) == 1  # kept for the new definitions: nothing counted again
    restated = _plain(_load(home))
    (home / "state" / "derived.json").unlink()
    assert _plain(_load(home)) == restated


def test_a_key_rotation_keeps_the_rollups_and_the_state_points(
    home: Path, run_inproc, monkeypatch: pytest.MonkeyPatch
):
    """After ``keys rotate`` the rollups fold only the rotation's entry (not the chain from
    line 1), and an explanation still starts from the points kept before it."""
    from ledger.edges.files.chainfile import ChainFile
    from ledger.services.chain import state
    from ledger.services.views.rollups import catch_up

    monkeypatch.setattr(state, "POINT_EVERY", 100)
    append_entries(home, 1_000, clean_env())
    env = {"LEDGER_BILLING_STALE_HALT_PCT": "100"}
    h = ["--home", str(home)]
    ref = run_inproc([*h, "verdict", "0.01"], env=env).json()["verdict_ref"]
    assert catch_up(Runtime(home, clean_env())).rebuilt
    assert run_inproc([*h, "keys", "rotate"], env=env).code == 0

    caught = catch_up(Runtime(home, clean_env()))
    assert (caught.rebuilt, caught.folded) == (False, 1)
    read: list[bytes] = []
    lines = ChainFile.iter_lines

    def counting(self: ChainFile, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        for raw in lines(self, start, end):
            read.append(raw)
            yield raw

    monkeypatch.setattr(ChainFile, "iter_lines", counting)
    assert run_inproc([*h, "explain", ref, "--json"], env=env).code == 0
    assert len(read) < 20, len(read)


def test_a_verdict_waits_for_another_process_counting_the_budgets_not_for_the_chain_lock(
    home: Path,
):
    """While one process counts changed budgets (it holds the derived state's restate lock),
    a verdict under the new budgets waits for it without holding the chain lock (a writer
    takes it meanwhile at once). Once released, the verdict finds its budgets kept and
    decides."""
    import threading
    import time

    from ledger.edges.files.statefile import StateFile
    from ledger.runtime import Runtime as HomeRuntime

    append_entries(home, 200, clean_env(), step=dt.timedelta(minutes=2))
    env = {**clean_env(), "LEDGER_BILLING_STALE_HALT_PCT": "100"}
    h = ["--home", str(home)]
    assert run_process([*h, "verdict", "0.01"], env=env).code == 0
    config = home / "ledger.toml"
    config.write_text(config.read_text() + MONTH_BUDGET)
    done: list[Any] = []
    runtime = HomeRuntime(home, clean_env())
    states = runtime.states
    assert isinstance(states, StateFile)
    with states.restating():
        waiting = threading.Thread(
            target=lambda: done.append(run_process([*h, "verdict", "0.01"], env=env))
        )
        waiting.start()
        time.sleep(2)
        assert not done  # waiting for the restate lock
        began = time.monotonic()
        with runtime.chain.transaction():
            assert time.monotonic() - began < 1  # the chain lock is free
    waiting.join(60)
    assert done
    assert done[0].code == 0, done[0].stderr
