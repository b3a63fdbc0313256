"""Child processes of the batteries (importable by ``spawn`` children; not tests).

    python -m tests.batteries.workers crash HOME SEED
        append, gate and record forever, in a seeded mix; after each call returns, print
        ``A <hash>`` (Writer.append_one), ``V <verdict_ref>`` (check_verdict) or
        ``R <hash>`` (record_call), flushed, so every printed hash names an entry the
        product acknowledged.

The concurrency battery's workers (``verdict_worker``, ``reconcile_worker``,
``snapshot_worker``) run in a ``spawn`` pool and return plain dicts.
"""

import random
import sys
import time
from pathlib import Path
from threading import Event
from typing import Any

from ledger.runtime import Runtime
from tests.gate_helpers import outcome_key


def _wait_for(path: Path, limit: float = 60.0) -> None:
    pause = Event()
    deadline = time.monotonic() + limit
    while not path.exists() and time.monotonic() < deadline:
        pause.wait(0.002)


def crash_writer(home: Path, seed: int) -> None:
    """Append, gate and record until killed; print each acknowledged hash."""
    from ledger.services.chain.writer import Writer
    from ledger.services.gate.gate import check_verdict
    from ledger.services.gate.recording import record_call

    rng = random.Random(seed)
    runtime = Runtime(home)
    writer = Writer(runtime)
    writer.signer()
    out = sys.stdout
    index = 0
    while True:
        index += 1
        choice = rng.random()
        if choice < 0.4:
            payload = {
                "provider": "openai",
                "actual_micros": index,
                "utc_day": runtime.clock.now().strftime("%Y-%m-%d"),
                "verdict_ref": None,
                "settled": False,
                "cycle_id": f"crash-{seed}-{index}",
            }
            out.write(f"A {writer.append_one('budget.record_call', payload).entry_hash}\n")
        else:
            outcome = check_verdict(runtime, rng.randint(1, 50_000), rng.choice([None, "openai"]))
            if outcome.verdict_ref is None:
                out.write(f"U {outcome.recording_error}\n")
            else:
                out.write(f"V {outcome.verdict_ref}\n")
            out.flush()
            if outcome.verdict_ref is not None and choice < 0.8:
                recorded = record_call(
                    runtime, rng.randint(0, 50_000), "openai", outcome.verdict_ref
                )
                out.write(f"R {recorded.entry_hash}\n")
        out.flush()


# --- concurrency battery -----------------------------------------------------------------


def verdict_worker(
    home: str, env: dict[str, str], calls: int, go: str, seed: int
) -> dict[str, Any]:
    """``calls`` verdicts with seeded estimates and scopes; counts by outcome."""
    from ledger.services.gate.gate import check_verdict

    rng = random.Random(seed)
    runtime = Runtime(Path(home), env)
    _wait_for(Path(go))
    counts: dict[str, int] = {}
    for _ in range(calls):
        estimate = rng.choice([250_000, 500_000, 1_000_000, 1_500_000, 2_750_000])
        provider = rng.choice([None, "openai", "anthropic"])
        key = outcome_key(check_verdict(runtime, estimate, provider))
        counts[key] = counts.get(key, 0) + 1
    return counts


def reconcile_worker(home: str, env: dict[str, str], go: str, stop: str) -> dict[str, Any]:
    """Reconcile the aggregate scope again and again until ``stop`` exists."""
    from ledger.services.billing.reconcile import reconcile

    _wait_for(Path(go))
    pause = Event()
    counts: dict[str, int] = {}
    while not Path(stop).exists():
        outcome = reconcile(Runtime(Path(home), env), "aggregate")
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
        pause.wait(0.05)
    return counts


def snapshot_worker(home: str, env: dict[str, str], go: str, stop: str) -> dict[str, Any]:
    """Take snapshots (each verifies the chain under the lock) until ``stop`` exists."""
    from ledger.services.chain.snapshot import take_snapshot

    _wait_for(Path(go))
    pause = Event()
    counts: dict[str, int] = {"snapshots": 0}
    while not Path(stop).exists():
        take_snapshot(Runtime(Path(home), env))
        counts["snapshots"] += 1
        pause.wait(0.3)
    return counts


def main(argv: list[str]) -> int:
    """Run one child mode (see the module docstring)."""
    if argv[:1] == ["crash"]:
        crash_writer(Path(argv[1]), int(argv[2]))
        return 0
    raise SystemExit(f"unknown mode {argv!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
