"""Figures for the USD gate's per-call path (not a test; prints a report).

    python bench/bench_gate.py            # full run (1,000,000-entry chain)
    python bench/bench_gate.py --quick    # a small run for a smoke check
    python bench/bench_gate.py --entries 200000 --runs 30 --verdicts 200

1. cold ``ledger verdict`` process wall time (the installed console script),
   p50/p90 over ``--runs`` runs, and ``python -X importtime`` top contributors;
2. import time of the modules on the verdict path, each in a fresh interpreter;
3. in-process verdict + durable append rate (``check_verdict``, fsync each);
4. verdict time at 1,000 entries vs ``--entries`` entries (goal: ratio ≤ 1.2).

The big chain is built fast: entry bytes come from a canonical template
(RFC 8785 output of the product's own ``canonical_bytes``) with only
``prev_hash``, ``ts_utc`` and ``verdict_ref`` spliced in, and signatures are made
in parallel with the home's own key. Derived state is then built once, by
default the way the product does it when none exists (a verdict that verifies
the whole chain), or with ``--state fold`` by folding the entries directly.
"""

import argparse
import datetime as dt
import hashlib
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NOW = dt.datetime(2026, 3, 1, 20, 0, 0, tzinfo=dt.UTC)
CAP_USD = "1000000000"  # large enough that every benchmark verdict is admitted
BASE_ENV_EXTRA = {"LEDGER_BILLING_STALE_HALT_PCT": "100"}
VERDICT_PATH_MODULES = (
    "ledger.cli",
    "ledger.cli.fast",
    "ledger.cli.fast_budget",
    "ledger.runtime",
    "ledger.services.gate",
    "ledger.services.state",
    "ledger.services.writer",
    "ledger.core.verdict",
    "ledger.core.spend",
    "ledger.core.seal",
    "ledger.core.signing",
    "ledger.edges.chainfile",
    "ledger.edges.statefile",
    "ledger.edges.keyfiles",
)

_SIGNER: Any = None  # set before forking the signing pool


def check(condition: bool, what: str) -> None:
    """Stop the benchmark if an assumption does not hold."""
    if not condition:
        raise SystemExit(f"bench_gate: {what}")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(extra)
    return env


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def ledger_script() -> str:
    candidate = Path(sys.executable).parent / "ledger"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("ledger")
    if found is None:
        raise SystemExit("the `ledger` console script is not installed")
    return found


def init_home(path: Path) -> None:
    proc = subprocess.run(
        [ledger_script(), "--home", str(path), "init", "--daily-cap-usd", CAP_USD],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ledger init failed: {proc.stderr}")


# --- 1. cold process -------------------------------------------------------------------


def cold_process(workdir: Path, runs: int) -> None:
    print(f"\n== 1. cold `ledger verdict` process ({runs} runs) ==")
    home = workdir / "cold"
    init_home(home)
    env = clean_env(**BASE_ENV_EXTRA)
    script = ledger_script()
    argv = [script, "--home", str(home), "verdict", "0.01"]
    for _ in range(3):  # warm the page cache and the state file
        subprocess.run(argv, capture_output=True, env=env, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"verdict failed: {proc.stderr!r}")
    baseline = []
    for _ in range(max(5, runs // 3)):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        baseline.append(time.perf_counter() - start)
    print(f"  script: {script}")
    print(
        f"  ledger verdict   p50 {fmt_ms(pct(times, 0.5))}   p90 {fmt_ms(pct(times, 0.9))}"
        f"   min {fmt_ms(min(times))}   max {fmt_ms(max(times))}"
    )
    print(f"  python -c pass   p50 {fmt_ms(pct(baseline, 0.5))}   (interpreter start-up floor)")

    traced = subprocess.run(
        [sys.executable, "-X", "importtime", script, "--home", str(home), "verdict", "0.01"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    rows = parse_importtime(traced.stderr)
    total = sum(self_us for _name, self_us, _cum in rows)
    print(f"  python -X importtime: {len(rows)} modules, {total / 1000:.1f} ms of self time")
    print("  top contributors by self time:")
    for name, self_us, cum_us in sorted(rows, key=lambda r: -r[1])[:12]:
        print(f"    {self_us / 1000:7.2f} ms self  {cum_us / 1000:7.2f} ms cum  {name}")
    print("  top-level imports by cumulative time:")
    top = [row for row in rows if not row[0].startswith(" ")]
    for name, _self, cum_us in sorted(top, key=lambda r: -r[2])[:8]:
        print(f"    {cum_us / 1000:7.2f} ms cum  {name.strip()}")
    heavy = {"typer", "jsonschema", "apscheduler", "click", "rich"}
    loaded = {name.strip().split(".")[0] for name, _s, _c in rows} & heavy
    print(f"  heavy packages imported on the verdict path: {sorted(loaded) or 'none'}")


def parse_importtime(stderr: str) -> list[tuple[str, int, int]]:
    """``(name, self_us, cumulative_us)`` rows; nested imports keep their indentation."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_part, cum_part, name = line[len("import time:") :].split("|", 2)
        rows.append((name.rstrip()[1:], int(self_part), int(cum_part)))
    return rows


# --- 2. import time of verdict-path modules ------------------------------------------


def import_times(repeats: int) -> None:
    print(
        f"\n== 2. import time of verdict-path modules (fresh interpreter, median of {repeats}) =="
    )
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "__import__(sys.argv[1])\n"
        "print(time.perf_counter() - t)\n"
    )
    for module in VERDICT_PATH_MODULES:
        samples = []
        for _ in range(repeats):
            out = subprocess.run(
                [sys.executable, "-c", code, module],
                capture_output=True,
                text=True,
                env=clean_env(),
                check=True,
            ).stdout
            samples.append(float(out))
        print(f"  {fmt_ms(statistics.median(samples))}  {module}")


# --- 3. in-process rate ------------------------------------------------------------------


def inprocess_rate(workdir: Path, calls: int) -> None:
    from ledger.runtime import Runtime
    from ledger.services.gate import check_verdict
    from ledger.services.recording import record_call

    print(f"\n== 3. in-process verdict + durable append ({calls} calls) ==")
    home = workdir / "rate"
    init_home(home)
    runtime = Runtime(home, clean_env(**BASE_ENV_EXTRA))
    check_verdict(runtime, 10_000)  # load keys, create state
    start = time.perf_counter()
    for _ in range(calls):
        outcome = check_verdict(runtime, 10_000)
        check(outcome.verdict_ref is not None, "verdict not recorded")
    elapsed = time.perf_counter() - start
    print(
        f"  check_verdict: {calls / elapsed:8.0f} calls/s   ({elapsed / calls * 1e3:.3f} ms/call)"
    )
    start = time.perf_counter()
    for _ in range(calls):
        record_call(runtime, 10_000, "openai")
    elapsed = time.perf_counter() - start
    print(
        f"  record_call:   {calls / elapsed:8.0f} calls/s   ({elapsed / calls * 1e3:.3f} ms/call)"
    )
    probe = workdir / "fsync.probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = b"x" * 700 + b"\n"
    start = time.perf_counter()
    for _ in range(calls):
        os.write(fd, line)
        os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    print(f"  bare write+fsync of a 700-byte line: {calls / elapsed:8.0f} /s (the disk's floor)")


# --- 4. verdict time vs chain length ----------------------------------------------------


def _templates(home: Path, day: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Real payloads of an admitted verdict and of the record that settles it."""
    from ledger.runtime import Runtime
    from ledger.services.gate import check_verdict
    from ledger.services.recording import record_call

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
    from ledger.services.writer import Writer

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
    from ledger.services.gate import check_verdict

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small, fast run")
    parser.add_argument("--entries", type=int, help="the big chain's length")
    parser.add_argument("--runs", type=int, help="cold process runs")
    parser.add_argument("--verdicts", type=int, help="timed verdicts per chain length")
    parser.add_argument("--calls", type=int, help="in-process calls for the rate")
    parser.add_argument("--state", choices=("verify", "fold"), default="verify")
    parser.add_argument(
        "--only", choices=("cold", "imports", "rate", "scale"), action="append", default=None
    )
    args = parser.parse_args(argv)
    entries = args.entries or (20_000 if args.quick else 1_000_000)
    runs = args.runs or (10 if args.quick else 30)
    verdicts = args.verdicts or (50 if args.quick else 200)
    calls = args.calls or (200 if args.quick else 1000)
    sections = set(args.only or ("cold", "imports", "rate", "scale"))
    print(
        f"bench_gate: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"entries={entries:,} runs={runs} verdicts={verdicts} calls={calls} state={args.state}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        workdir = Path(tmp)
        if "cold" in sections:
            cold_process(workdir, runs)
        if "imports" in sections:
            import_times(3 if args.quick else 5)
        if "rate" in sections:
            inprocess_rate(workdir, calls)
        if "scale" in sections:
            scale(workdir, 1_000, entries, verdicts, args.state)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
