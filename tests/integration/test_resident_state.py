"""The derived state a resident gate keeps in memory between writes of its file.

A job is lent the kept state itself and changes it in place; a job that fails
after changing it and before saving it back must leave nothing of its change
behind, so nothing is counted twice.
"""

import pytest

from ledger.batching import BatchRunner
from ledger.runtime import Runtime
from ledger.services.chain.state import load_counter
from ledger.services.gate import calls
from tests.gate_helpers import env_at


def _spent(home, env) -> int:
    runtime = Runtime(home, env)
    with runtime.chain.read_transaction() as tx:
        counter = load_counter(tx, runtime)
    assert counter.problem is None
    (day,) = counter.data["usd"]["spend"]
    return int(counter.data["usd"]["spend"][day]["anthropic"])


def test_a_job_that_fails_between_its_change_and_its_save_counts_nothing_twice(home):
    env = env_at()
    runner = BatchRunner(home, env, lambda _line: None)

    def record(runtime: Runtime) -> None:
        calls.record(runtime, "1.00", "anthropic")

    def changes_then_fails(runtime: Runtime) -> None:
        with runtime.chain.transaction() as tx:
            counter = load_counter(tx, runtime)
            # As a fold of an entry whose save never came: the kept state changed.
            (day,) = counter.data["usd"]["spend"]
            counter.data["usd"]["spend"][day]["anthropic"] += 5_000_000
            raise RuntimeError("failed before its save")

    runner.run(record, lambda: None)
    with pytest.raises(RuntimeError):
        runner.run(changes_then_fails, lambda: None)
    runner.run(record, lambda: None)
    runner.close()
    assert _spent(home, env) == 2_000_000
