"""Figures for the console (not a test; prints a report).

    python bench/bench_console.py                 # 1k and 20k calls
    python bench/bench_console.py --sizes 1000    # one size
    python bench/bench_console.py --fast --sizes 500 500000   # a big home, built fast

For each home size (calls, each a verdict and a record sealed through the
Python API, so 2 entries per call; with ``--fast``, written with the product's
signer in parallel by ``gate_scale.build_chain``, the gate's state and the
rollups folded before the console starts, and their build time reported):

1. every page's and JSON endpoint's p50 over 30 requests to a running
   ``ledger console`` (a bearer key; the call index warmed by one request
   first, whose time is reported as ``first``);
2. the overview's weight: bytes of its HTML and of each file it loads, and the
   number of requests;
3. seal to Live: a record sealed in this process (timed from the moment its
   ``record`` call returned, i.e. durable) to its ``data:`` line on an open
   ``/console/api/live`` feed; p50 and p99 over 100 records.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from bench_calls import clean_env
from common import out_dir

PAGES = ["/console/", "/console/live", "/console/spend?by=agent", "/console/calls",
         "/console/keys", "/console/alerts", "/console/integrity"]  # fmt: skip
APIS = ["/console/api/overview", "/console/api/spend?by=model",
        "/console/api/spend?by=provider&from=2026-03-01&to=2026-03-31", "/console/api/calls",
        "/console/api/calls?agent=agent-3", "/console/api/calls?provider=openai&limit=200",
        "/console/api/keys"]  # fmt: skip


def _ledger(home: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        env=clean_env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout


def make_home(base: Path, calls: int) -> tuple[Path, str]:
    import ledger

    home = base / f"home-{calls}"
    _ledger(home, "init", "--daily-cap-usd", "1000000000", "--billing", "none")
    secret = json.loads(_ledger(home, "keys", "issue", "bench", "--role", "admin"))["key"]
    book = ledger.open(home=str(home))
    for index in range(calls):
        decided = book.verdict(0.02, provider="anthropic", agent=f"agent-{index % 10}",
                               cycle_id=f"s-{index % 50}")  # fmt: skip
        book.record(0.01, provider="anthropic", verdict_ref=decided.verdict_ref,
                    agent=f"agent-{index % 10}", cycle_id=f"s-{index % 50}",
                    idempotency_key=f"bench-{index}")  # fmt: skip
    return home, secret


def make_big_home(base: Path, calls: int) -> tuple[Path, str]:
    """A home of ``calls`` verdict + record pairs written fast, its derived state built."""
    from gate_common import NOW, init_home
    from gate_scale import build_chain, fold_state

    from ledger.runtime import Runtime
    from ledger.services.views.rollups import catch_up

    home = base / f"home-fast-{calls}"
    init_home(home)
    size, took = build_chain(home, 2 * calls, NOW)
    print(f"   chain: {2 * calls:,} entries, {size / 1e6:.0f} MB, written in {took:.0f} s")
    fold_state(home)
    secret = json.loads(_ledger(home, "keys", "issue", "bench", "--role", "admin"))["key"]
    import ledger

    began = time.perf_counter()
    ledger.open(home=str(home)).verdict(0.01, provider="anthropic")  # the gate's state saved
    print(f"   the gate's state folded by a first verdict in {time.perf_counter() - began:.0f} s")
    began = time.perf_counter()
    caught = catch_up(Runtime(home, clean_env()))
    print(f"   rollups and calls table folded from line 1: {caught.entries:,} entries in "
          f"{time.perf_counter() - began:.0f} s")  # fmt: skip
    return home, secret


def start_console(home: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "console", "--listen",
         "127.0.0.1:0"], env=clean_env(), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for line in proc.stderr or ():
        found = re.search(r"(http://\S+)/console/login", line)
        if found:
            return proc, found.group(1)
    raise SystemExit("the console did not start")


def p50_of(client: httpx.Client, path: str, runs: int = 30) -> tuple[float, float]:
    start = time.perf_counter()
    if client.get(path).status_code != 200:
        raise SystemExit(f"{path}: not 200")
    first = time.perf_counter() - start
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        client.get(path)
        times.append(time.perf_counter() - start)
    return first * 1000, statistics.median(times) * 1000


def weight(client: httpx.Client) -> dict[str, Any]:
    page = client.get("/console/")
    files = re.findall(r'(?:href|src)="(/console/static/[^"]+)"', page.text)
    sizes = {"/console/": len(page.content)}
    for path in files:
        sizes[path] = len(client.get(path).content)
    return {"requests": len(sizes), "bytes": sum(sizes.values()), "each": sizes}


def live_latency(home: Path, url: str, secret: str, samples: int = 100) -> dict[str, float]:
    import ledger

    book = ledger.open(home=str(home))
    arrived: dict[str, float] = {}
    ready = threading.Event()

    def listen() -> None:
        headers = {"authorization": f"Bearer {secret}"}
        with httpx.stream("GET", f"{url}/console/api/live", headers=headers, timeout=60) as feed:
            ready.set()
            for line in feed.iter_lines():
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    if event["kind"] == "record":
                        arrived[event["entry_hash"]] = time.perf_counter()
                        if len(arrived) >= samples:
                            return

    reader = threading.Thread(target=listen, daemon=True)
    reader.start()
    ready.wait(30)
    time.sleep(0.5)
    sealed: dict[str, float] = {}
    for index in range(samples):
        done = book.record(0.01, provider="anthropic", idempotency_key=f"live-{index}")
        sealed[done.entry_hash] = time.perf_counter()
        time.sleep(0.03)
    reader.join(60)
    delays = sorted((arrived[h] - t) * 1000 for h, t in sealed.items() if h in arrived)
    return {
        "p50_ms": statistics.median(delays),
        "p99_ms": delays[min(len(delays) - 1, int(len(delays) * 0.99))],
        "received": len(delays),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000])
    parser.add_argument("--dir")
    parser.add_argument("--home", help="reuse a home this script built (its size: --sizes)")
    parser.add_argument("--fast", action="store_true", help="write the homes fast (big sizes)")
    options = parser.parse_args()
    base = out_dir(options.dir)
    for calls in options.sizes:
        started = time.perf_counter()
        if options.home:
            home = Path(options.home)
            secret = json.loads(_ledger(home, "keys", "issue", f"b{int(time.time())}", "--role",
                                        "admin"))["key"]  # fmt: skip
        elif options.fast:
            home, secret = make_big_home(base, calls)
        else:
            home, secret = make_home(base, calls)
        print(f"## {calls} calls ({2 * calls + 2} entries), built in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        proc, url = start_console(home)
        try:
            headers = {"authorization": f"Bearer {secret}"}
            with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
                signed = httpx.post(f"{url}/console/login", data={"key": secret})
                pages = httpx.Client(base_url=url, cookies=signed.cookies, timeout=60)
                for path in PAGES:
                    first, p50 = p50_of(pages, path)
                    print(f"page {path:32} first {first:7.1f} ms  p50 {p50:6.1f} ms")
                for path in APIS:
                    first, p50 = p50_of(client, path)
                    print(f"json {path:32} first {first:7.1f} ms  p50 {p50:6.1f} ms")
                print("overview weight:", json.dumps(weight(pages)))
                pages.close()
            if calls == options.sizes[0]:
                print("seal to Live:", json.dumps(live_latency(home, url, secret)))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
