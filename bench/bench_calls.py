"""Figures for prices, the Python API and the SDK guards (not a test; prints a report).

    python bench/bench_calls.py            # full run
    python bench/bench_calls.py --quick    # a small run for a smoke check

1. cold ``ledger verdict --model M --input-tokens N --max-output-tokens K``
   against cold ``ledger verdict 0.25`` (the installed console script, runs
   interleaved, p50 of each; goal: ratio <= 1.1);
2. ``import ledger`` against ``import json``, each timed inside a fresh
   interpreter (median);
3. the per-call overhead of ``ledger.integrations.anthropic.guard_client``
   around a request to a local HTTP server answering like the Messages API,
   in-process: p50 of (guarded call - bare SDK call), the calls paired and
   interleaved; each guarded call seals a verdict and a record, each fsync'd
   (goal: <= 3 ms). Beside it, the same verdict and record sealed directly
   (the chain's part of the overhead) and the difference: the transport's own
   part (estimating the request, reading the response's usage).

Homes live on the repository's disk (``bench/out``, or ``--dir``), not on a
tmpfs, so every append really reaches the disk.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import ledger_script, out_dir

REPO = Path(__file__).resolve().parent.parent

CAP_USD = "1000000000"  # every benchmark verdict is admitted
MODEL = "claude-sonnet-4-5"
PRICES = """
[prices."anthropic/test-model"]
input_per_mtok = 3
output_per_mtok = 15
cache_read_per_mtok = 0.3
cache_write_per_mtok = 3.75
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update({"LEDGER_BILLING_STALE_HALT_PCT": "100", "LEDGER_NO_SERVER": "1"}, **extra)
    return env


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


def init_home(path: Path) -> None:
    proc = subprocess.run(
        [ledger_script(), "--home", str(path), "init", "--daily-cap-usd", CAP_USD],
        capture_output=True, text=True, env=clean_env(), check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"ledger init failed: {proc.stderr}")


# --- 1. cold verdict from tokens vs from dollars ------------------------------------------


def cold_verdicts(workdir: Path, runs: int) -> None:
    print(
        f"\n== 1. cold `ledger verdict`, priced from tokens vs given in USD ({runs} runs each) =="
    )
    home = workdir / "cold"
    init_home(home)
    env = clean_env()
    script = ledger_script()
    argvs = {
        "usd": [script, "--home", str(home), "verdict", "0.25", "--provider", "anthropic"],
        "tokens": [script, "--home", str(home), "verdict", "--provider", "anthropic",
                   "--model", MODEL, "--input-tokens", "1200", "--max-output-tokens", "800"],
    }  # fmt: skip
    for argv in argvs.values():  # warm the page cache, the state file, the price snapshot
        for _ in range(3):
            subprocess.run(argv, capture_output=True, env=env, check=True)
    times: dict[str, list[float]] = {name: [] for name in argvs}
    for index in range(runs):
        order = ("usd", "tokens") if index % 2 else ("tokens", "usd")  # neither always first
        for name in order:
            argv = argvs[name]
            start = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, env=env, check=False)
            times[name].append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"verdict failed: {proc.stderr!r}")
    usd, tokens = pct(times["usd"], 0.5), pct(times["tokens"], 0.5)
    print(f"  script: {script}")
    print(
        f"  cold verdict --model (tokens)  p50 {ms(tokens)}   p90 {ms(pct(times['tokens'], 0.9))}"
    )
    print(f"  cold verdict 0.25 (usd)        p50 {ms(usd)}   p90 {ms(pct(times['usd'], 0.9))}")
    paired = statistics.median(t / u for t, u in zip(times["tokens"], times["usd"], strict=True))
    print(f"  ratio tokens/usd: {tokens / usd:.3f}x   (median of paired runs {paired:.3f}x)")


# --- 2. import ledger vs import json ------------------------------------------------------


def import_times(repeats: int) -> None:
    print(f"\n== 2. import time in a fresh interpreter (median of {repeats}) ==")
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "__import__(sys.argv[1])\n"
        "print(time.perf_counter() - t)\n"
    )
    medians = {}
    for module in ("ledger", "json"):
        samples = []
        for _ in range(repeats):
            out = subprocess.run(
                [sys.executable, "-c", code, module],
                capture_output=True, text=True, env=clean_env(), check=True, cwd=REPO,
            ).stdout  # fmt: skip
            samples.append(float(out))
        medians[module] = statistics.median(samples)
        print(f"  import {module:<6}  median {ms(medians[module])}")
    print(f"  ratio ledger/json: {medians['ledger'] / medians['json']:.2f}x")


# --- 3. guard_client overhead -------------------------------------------------------------


def guard_overhead(workdir: Path, calls: int) -> None:
    import anthropic

    import ledger
    from ledger.integrations.anthropic import guard_client

    sys.path.insert(0, str(REPO))  # the tests' local provider server
    from tests.fakes.provider import FakeProvider

    print(f"\n== 3. guard_client per-call overhead, in-process ({calls} paired calls) ==")
    home = workdir / "guard"
    init_home(home)
    with (home / "ledger.toml").open("a") as handle:
        handle.write(PRICES)
    for key, value in clean_env().items():
        if key.startswith("LEDGER_"):
            os.environ[key] = value
    server = FakeProvider(detailed_usage=True)
    book = ledger.open(home)
    bare = anthropic.Anthropic(base_url=server.url, api_key="bench", max_retries=0)
    guarded = guard_client(
        anthropic.Anthropic(base_url=server.url, api_key="bench", max_retries=0), book
    )
    messages = [{"role": "user", "content": "hello"}]

    def timed(client: Any) -> float:
        start = time.perf_counter()
        client.messages.create(model="test-model", max_tokens=800, messages=messages)
        return time.perf_counter() - start

    def chain_share(index: int) -> float:
        """The two envelopes a guarded call seals, sealed directly: the chain's part of it."""
        start = time.perf_counter()
        verdict = book.verdict(
            provider="anthropic", model="test-model", input_tokens=2, max_output_tokens=800
        )
        book.record(
            provider="anthropic", model="test-model", verdict_ref=verdict.verdict_ref,
            usage={"input_tokens": 1000, "output_tokens": 700}, idempotency_key=f"bench-{index}",
        )  # fmt: skip
        return time.perf_counter() - start

    try:
        for _ in range(20):  # warm both clients' connections and the home's files
            timed(bare)
            timed(guarded)
        pairs = []
        chain = []
        for index in range(calls):
            if index % 2:  # alternate the order so neither side always runs second
                plain, wrapped = timed(bare), timed(guarded)
            else:
                wrapped, plain = timed(guarded), timed(bare)
            pairs.append((wrapped, plain))
            chain.append(chain_share(index))
    finally:
        bare.close()
        server.close()
    overhead = [wrapped - plain for wrapped, plain in pairs]
    entries = len((home / "events.jsonl").read_bytes().splitlines())
    print(f"  bare SDK call        p50 {ms(pct([p for _w, p in pairs], 0.5))}")
    print(f"  guarded call         p50 {ms(pct([w for w, _p in pairs], 0.5))}")
    print(f"  guard_client overhead p50 {ms(pct(overhead, 0.5))}   p90 {ms(pct(overhead, 0.9))}")
    own = [o - c for o, c in zip(overhead, chain, strict=True)]
    print(f"  verdict + record, in-process p50 {ms(pct(chain, 0.5))}   (the chain's part)")
    print(f"  guard's own part p50 {ms(pct(own, 0.5))}   (overhead - verdict - record)")
    print(f"  chain entries sealed: {entries} (a verdict and a record per guarded call)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small, fast run")
    parser.add_argument("--runs", type=int, help="cold process runs of each verdict")
    parser.add_argument("--calls", type=int, help="paired guarded / bare calls")
    parser.add_argument("--dir", help="where the homes go (default: bench/out)")
    args = parser.parse_args(argv)
    runs = args.runs or (10 if args.quick else 30)
    calls = args.calls or (100 if args.quick else 400)
    print(
        f"bench_calls: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, runs={runs} "
        f"calls={calls}, load average {os.getloadavg()[0]:.2f}"
    )
    workdir = out_dir(args.dir)
    try:
        cold_verdicts(workdir, runs)
        import_times(5 if args.quick else 15)
        guard_overhead(workdir, calls)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
