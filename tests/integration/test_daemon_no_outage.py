"""A daemon starting on a long chain never holds the chain lock for long.

At start the daemon verifies the whole chain and, when the daily snapshot was
missed, takes one. Both read the chain without its lock, up to the head read at
their start, so verdicts issued at once are all decided: with a lock timeout of
one second, any job holding the lock for longer than that refuses them.
"""

import time
from pathlib import Path

from tests.conftest import clean_env, run_process
from tests.helpers.bighome import append_entries
from tests.integration.test_daemon import _start_daemon, _stop_daemon

ENTRIES = 4_000


def _logged(lines: list[str], needle: str) -> bool:
    return any(needle in line for line in lines)


def test_verdicts_issued_while_a_daemon_starts_on_a_long_chain_are_all_decided(home: Path):
    env = clean_env(LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS="1")
    append_entries(home, ENTRIES, env)
    # The derived state is built once, as any home has it (its first verdict).
    assert run_process(["--home", str(home), "verdict", "0.01"], env).code == 0
    proc, lines = _start_daemon(home, env)
    outcomes = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            result = run_process(["--home", str(home), "verdict", "0.01"], env)
            outcomes.append((result.code, result.stderr.strip()))
            if _logged(lines.lines, "verify: ") and _logged(lines.lines, "snapshot: "):
                break
        assert _logged(lines.lines, "verify: OK"), lines.lines
        assert _logged(lines.lines, "snapshot: "), lines.lines
    finally:
        _stop_daemon(proc)
    assert len(outcomes) >= 2
    assert all(code == 0 for code, _ in outcomes), outcomes
    # The snapshot read the chain as it was when it started; the verdicts
    # appended meanwhile still verify after it.
    assert run_process(["--home", str(home), "verify-chain"], env).code == 0
