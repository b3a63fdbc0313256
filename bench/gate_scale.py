"""Section 4 of bench_gate.py: verdict time at 1,000 entries vs a big chain, built fast
from canonical templates with signatures made in parallel, its derived state built by a
verifying verdict or folded directly."""

import datetime as dt
import hashlib
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from common import ledger_script
from gate_common import (
    BASE_ENV_EXTRA,
    NOW,
    check,
    clean_env,
    fmt_ms,
    init_home,
    iso,
    pct,
)

_SIGNER: Any = None  # set before forking the signing pool


# --- 4. verdict time vs chain length ----------------------------------------------------


def _templates(home: Path, day: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Real payloads of an admitted verdict and of the record that settles it."""
    from ledger.runtime import Runtime
    from ledger.services.gate.gate import check_verdict
    from ledger.services.gate.recording import record_call

    scratch = home.parent / (home.name + "-template")
    init_home(scratch)
    runtime = Runtime(scratch, clean_env(**BASE_ENV_EXTRA, LEDGER_NOW=iso(NOW)))
    ref = check_verdict(runtime, 10_000).verdict_ref
    record_call(runtime, 10_000, "openai", ref)
    lines = (scratch / "events.jsonl").read_bytes().splitlines()
    allow, record = (json.loads(line)["payload"] for line in lines)
    check(allow["utc_day"] == day and record["utc_day"] == day, "template day")
    check(record["settled"] is True, "template record did not settle")
    shutil.rmtree(scratch)
    return allow, record


def _preimage_template(event_type: str, payload: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
    from ledger.core.canonical import canonical_bytes
    from ledger.core.envelope import unsigned_entry

    ts_mark, prev_mark, ref_mark = "1999-12-31T23:59:59.999999Z", "e" * 64, "d" * 64
    if "verdict_ref" in payload:
        payload = {**payload, "verdict_ref": ref_mark}
    preimage = canonical_bytes(unsigned_entry(event_type, payload, ts_mark, prev_mark))
    check(preimage.count(ts_mark.encode()) == 1, "ts mark not unique")
    check(preimage.count(prev_mark.encode()) == 1, "prev mark not unique")
    return _split_marks(preimage, [ts_mark.encode(), prev_mark.encode(), ref_mark.encode()])


def _split_marks(preimage: bytes, marks: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The preimage cut at each mark: the parts between, and the marks in order."""
    positions = sorted((preimage.find(mark), mark) for mark in marks if mark in preimage)
    parts, order, cursor = [], [], 0
    for position, mark in positions:
        parts.append(preimage[cursor:position])
        order.append(mark)
        cursor = position + len(mark)
    parts.append(preimage[cursor:])
    return parts, order


def _sign_chunk(chunk: list[bytes]) -> list[str]:
    return [_SIGNER.sign_b64(preimage) for preimage in chunk]


def build_chain(home: Path, entries: int, start: dt.datetime) -> tuple[int, float]:
    """Write ``entries`` signed entries (verdict + settling record pairs); returns bytes, s."""
    global _SIGNER  # noqa: PLW0603 - handed to the forked signing workers
    from ledger.core.envelope import render_line
    from ledger.runtime import Runtime
    from ledger.services.chain.writer import Writer

    began = time.perf_counter()
    day = start.strftime("%Y-%m-%d")
    allow_payload, record_payload = _templates(home, day)
    templates = {
        "budget.allow": _preimage_template("budget.allow", allow_payload),
        "budget.record_call": _preimage_template("budget.record_call", record_payload),
    }
    marks = {"ts": b"1999-12-31T23:59:59.999999Z", "prev": b"e" * 64, "ref": b"d" * 64}
    step = dt.timedelta(microseconds=max(1, int(3_600_000_000 / max(entries, 1))))
    preimages: list[bytes] = []
    prev = "GENESIS"
    last_allow = ""
    moment = start
    for index in range(entries):
        event_type = "budget.allow" if index % 2 == 0 else "budget.record_call"
        parts, order = templates[event_type]
        values = {
            marks["ts"]: iso(moment).encode(),
            marks["prev"]: prev.encode(),
            marks["ref"]: last_allow.encode(),
        }
        pieces = [parts[0]]
        for mark, part in zip(order, parts[1:], strict=True):
            pieces.append(values[mark])
            pieces.append(part)
        preimage = b"".join(pieces)
        preimages.append(preimage)
        prev = hashlib.sha256(preimage).hexdigest()
        if event_type == "budget.allow":
            last_allow = prev
        moment += step
    _SIGNER = Writer(Runtime(home, clean_env())).signer()
    chunk = 5_000
    chunks = [preimages[i : i + chunk] for i in range(0, len(preimages), chunk)]
    context = multiprocessing.get_context("fork")
    with context.Pool(os.cpu_count() or 1) as pool:
        signatures = [sig for part in pool.map(_sign_chunk, chunks) for sig in part]
    size = 0
    with (home / "events.jsonl").open("wb", buffering=1 << 20) as handle:
        for preimage, signature in zip(preimages, signatures, strict=True):
            line = render_line(preimage, signature, _SIGNER.key_id)
            handle.write(line)
            size += len(line)
        handle.flush()
        os.fsync(handle.fileno())
    return size, time.perf_counter() - began


def fold_state(home: Path) -> None:
    """Fold every entry into derived state directly (no signature checks)."""
    from ledger.core.envelope import parse_line
    from ledger.core.state import apply_parsed, empty_state
    from ledger.runtime import Runtime

    runtime = Runtime(home, clean_env())
    data = empty_state()
    parsed = None
    size = 0
    with (home / "events.jsonl").open("rb") as handle:
        for raw in handle:
            parsed = parse_line(raw.rstrip(b"\n"))
            apply_parsed(data, parsed, runtime.schema)
            size += len(raw)
    if parsed is None:
        raise SystemExit("bench_gate: empty chain")
    runtime.states.save_state(parsed.entry_hash, size, data)


def time_verdicts(home: Path, count: int, now: dt.datetime) -> list[float]:
    from ledger.runtime import Runtime
    from ledger.services.gate.gate import check_verdict

    runtime = Runtime(home, clean_env(**BASE_ENV_EXTRA, LEDGER_NOW=iso(now)))
    times = []
    for _ in range(count):
        start = time.perf_counter()
        outcome = check_verdict(runtime, 10_000)
        times.append(time.perf_counter() - start)
        if not outcome.decision.admits or outcome.verdict_ref is None:
            raise SystemExit(f"benchmark verdict not admitted: {outcome}")
    return times


def cold_verdicts(home: Path, runs: int, now: dt.datetime) -> list[float]:
    env = clean_env(**BASE_ENV_EXTRA, LEDGER_NOW=iso(now))
    argv = [ledger_script(), "--home", str(home), "verdict", "0.01"]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        times.append(time.perf_counter() - start)
    return times


def scale(workdir: Path, small: int, big: int, verdicts: int, state_mode: str) -> None:
    print(f"\n== 4. verdict time at {small:,} vs {big:,} entries ({verdicts} verdicts each) ==")
    start = NOW - dt.timedelta(hours=2)
    homes = {}
    for entries in (small, big):
        home = workdir / f"chain-{entries}"
        init_home(home)
        size, built = build_chain(home, entries, start)
        began = time.perf_counter()
        if state_mode == "verify":
            first = time_verdicts(home, 1, NOW)  # no state yet: verify the chain and fold it
            state_note = f"state built by the first verdict (full verify) in {sum(first):.1f} s"
        else:
            fold_state(home)
            state_note = f"state folded directly in {time.perf_counter() - began:.1f} s"
        state_bytes = (home / "state" / "derived.json").stat().st_size
        print(
            f"  {entries:>9,} entries: chain {size / 1e6:8.1f} MB built in {built:6.1f} s; "
            f"{state_note}; state file {state_bytes:,} bytes"
        )
        homes[entries] = home
    # interleave the two chains in rounds so that machine noise hits both alike
    times: dict[int, list[float]] = {small: [], big: []}
    cold: dict[int, list[float]] = {small: [], big: []}
    rounds = max(1, verdicts // 10)
    for _ in range(rounds):
        for entries, home in homes.items():
            times[entries] += time_verdicts(home, verdicts // rounds, NOW)
    for _ in range(5):
        for entries, home in homes.items():
            cold[entries] += cold_verdicts(home, 1, NOW)
    for entries, home in homes.items():
        series = times[entries]
        print(
            f"  {entries:>9,} entries: in-process verdict p50 {fmt_ms(pct(series, 0.5))}"
            f"  p90 {fmt_ms(pct(series, 0.9))}  mean {fmt_ms(statistics.fmean(series))};"
            f"  cold process p50 {fmt_ms(pct(cold[entries], 0.5))}"
        )
        verify = subprocess.run(
            [ledger_script(), "--home", str(home), "verify-chain"],
            capture_output=True,
            text=True,
            env=clean_env(),
            check=False,
        )
        print(f"      verify-chain: {(verify.stdout or verify.stderr).strip()}")
    p50 = pct(times[big], 0.5) / pct(times[small], 0.5)
    mean = statistics.fmean(times[big]) / statistics.fmean(times[small])
    cold_ratio = pct(cold[big], 0.5) / pct(cold[small], 0.5)
    verdict = "OK" if p50 <= 1.2 else "ABOVE GOAL"
    print(
        f"  ratio {big:,}/{small:,}: p50 {p50:.2f}x  mean {mean:.2f}x  cold process {cold_ratio:.2f}x"
        f"   (goal ≤ 1.2x: {verdict})"
    )
    for home in homes.values():
        shutil.rmtree(home)
