"""Battery: concurrency. Eight processes race for the last dollars of tight caps.

Eight worker processes call ``check_verdict`` in-process (seeded estimates of $0.25 to
$2.75, aggregate or per-provider scope) against a $100 daily cap with a $30 ``openai``
sub-cap, after $20 of spend was recorded. At the same time one process reconciles
the aggregate scope again and again (the shipped file observer reports exactly the
recorded $20, so there is no drift) and another takes snapshots (each verifies the
whole chain under the lock). ``LEDGER_BILLING_STALE_HALT_PCT=100`` keeps billing
staleness out of play.

Then the chain is replayed independently of the product: after each admitted verdict,
recorded spend plus open reservations must stay below every applicable cap
(overshoot: must be 0); no verdict may be ``counter_inconsistent`` or unrecorded;
the chain holds one entry per call and ``ledger verify-chain`` says OK.
"""

import json
import multiprocessing
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.batteries.common import observer_command, sized, summary, usd_text, write_reading
from tests.batteries.workers import reconcile_worker, snapshot_worker, verdict_worker
from tests.conftest import clean_env, run_process

PROCESSES = 8
CALLS = sized(150, 500)
CAP_MICROS = 100_000_000
OPENAI_CAP_MICROS = 30_000_000
PRE_SPEND = {"openai": 12_000_000, "anthropic": 8_000_000}
ADMITTING = {"budget.allow", "budget.warn_90"}


def replay(entries: list[dict[str, Any]]) -> tuple[int, int, int]:
    """Admissions, admissions that reached a cap, and the worst excess in micro-USD."""
    spent: Counter[str] = Counter()
    reserved: dict[str, tuple[str | None, int]] = {}
    admitted = violations = worst = 0
    caps: dict[str | None, int] = {None: CAP_MICROS, "openai": OPENAI_CAP_MICROS}
    for entry in entries:
        payload = entry["payload"]
        kind = entry["event_type"]
        if kind == "budget.record_call":
            spent[payload["provider"]] += payload["actual_micros"]
            if payload.get("verdict_ref"):
                reserved.pop(payload["verdict_ref"], None)
        elif kind in ADMITTING:
            admitted += 1
            provider = payload["provider"]
            reserved[entry["_hash"]] = (provider, payload["reservation"]["micros"])
            scopes = [None] + ([provider] if provider in caps else [])
            for scope in scopes:
                if scope is None:
                    total = sum(spent.values()) + sum(m for _p, m in reserved.values())
                else:
                    total = spent[scope] + sum(m for p, m in reserved.values() if p == scope)
                if total >= caps[scope]:
                    violations += 1
                    worst = max(worst, total - caps[scope])
    return admitted, violations, worst


@pytest.mark.timeout(sized(600, 3600))
def test_concurrency_battery(home, run_inproc, tmp_path, capsys):
    from ledger.core.envelope import parse_line

    answer = tmp_path / "observer.json"
    env = clean_env(
        LEDGER_BILLING_STALE_HALT_PCT="100",
        LEDGER_USD_PROVIDER_CAPS=json.dumps({"openai": OPENAI_CAP_MICROS / 1e6}),
        LEDGER_OBSERVER_COMMAND=observer_command(answer),
    )
    for provider, micros in PRE_SPEND.items():
        result = run_inproc(
            ["--home", str(home), "record", usd_text(micros), "--provider", provider], env=env
        )
        assert result.code == 0, result
    go, stop = tmp_path / "go", tmp_path / "stop"
    context = multiprocessing.get_context("spawn")
    began = time.monotonic()
    with context.Pool(PROCESSES + 2) as pool:
        verdicts = [
            pool.apply_async(verdict_worker, (str(home), env, CALLS, str(go), 1000 + n))
            for n in range(PROCESSES)
        ]
        reconciles = pool.apply_async(reconcile_worker, (str(home), env, str(go), str(stop)))
        snapshots = pool.apply_async(snapshot_worker, (str(home), env, str(go), str(stop)))
        time.sleep(1.0)  # let every worker import and wait at the line
        from ledger.core.timefmt import format_ts
        from ledger.edges.clock import SystemClock

        # the observer reports exactly the recorded spend, as of now: no drift, no lag
        write_reading(answer, sum(PRE_SPEND.values()), format_ts(SystemClock().now()))
        go.touch()
        parts = [job.get(timeout=500) for job in verdicts]
        stop.touch()
        background = Counter(reconciles.get(timeout=60)) + Counter(snapshots.get(timeout=60))
    elapsed = time.monotonic() - began
    totals: Counter[str] = Counter()
    for part in parts:
        totals.update(part)

    lines = (home / "events.jsonl").read_bytes().splitlines(keepends=True)
    entries = []
    for raw in lines:
        entry = json.loads(raw)
        entry["_hash"] = parse_line(raw.rstrip(b"\n")).entry_hash
        entries.append(entry)
    admitted, violations, worst = replay(entries)
    kinds = Counter(entry["event_type"] for entry in entries)
    verdict_entries = sum(n for kind, n in kinds.items() if kind.startswith("budget.") and kind
                          not in {"budget.record_call", "budget.reconcile", "budget.observation"})  # fmt: skip
    inconsistent = sum(n for key, n in totals.items() if "counter_inconsistent" in key)
    uncertain = sum(n for key, n in totals.items() if key.startswith("halt-uncertainty"))
    unrecorded = sum(n for key, n in totals.items() if key.endswith("/unrecorded"))
    verify = run_process(["--home", str(home), "verify-chain"], env=clean_env(), timeout=120)
    chain_ok = verify.code == 0 and verify.stdout.strip() == f"OK {len(entries)} entries"
    calls = PROCESSES * CALLS
    checks = {
        "no overshoot": violations == 0,
        "no counter_inconsistent": inconsistent == 0,
        "no other uncertainty halt": uncertain == 0,
        "every verdict recorded": unrecorded == 0 and verdict_entries == calls,
        "one valid chain": chain_ok,
        "the race filled the cap": totals.get("halt-100", 0) > 0 and admitted > 0,
        "reconciles found no drift": set(background) - {"snapshots"} == {"ok"},
        "snapshots ran during the race": background["snapshots"] > 0,
    }
    failed = [name for name, ok in checks.items() if not ok]
    summary(
        capsys, "concurrency", len(checks) - len(failed), len(failed),
        f"{PROCESSES} x {CALLS} verdicts{' (long)' if CALLS > 150 else ''} in {elapsed:.1f} s; "
        f"admitted {admitted}, overshoot {violations} (worst ${worst / 1e6:.2f}), "
        f"counter_inconsistent {inconsistent}, other uncertainty {uncertain}, "
        f"unrecorded {unrecorded}; {background['ok']} reconciles, "
        f"{background['snapshots']} snapshots alongside; verify-chain "
        f"{'OK' if chain_ok else 'FAILED'} {len(entries)} entries",
    )  # fmt: skip
    assert not failed, (failed, dict(totals), dict(background), verify)
    assert Path(home / "events.jsonl").stat().st_size > 0
