"""Open live views against the gateway's added latency (not a test; prints a report).

    python bench/bench_live_views.py [--views 50] [--calls 300]

A real ``ledger proxy`` in front of the local upstream (``tests/fakes/provider.py``)
and a real ``ledger console`` on the same home. The gateway's added latency (its
p50 minus the upstream's own, sequential non-streaming calls, interleaved in turns
of 10 so load hits both alike) is measured with no live view open, with
``--views`` open ``/console/api/live`` feeds (each a client reading every event),
and with none again, so drift on a shared machine shows. Goal (SPEC §18): with
the views open, within 1.1x of none.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import httpx
from bench_console import start_console
from bench_gateway import Gateway, calls, interleaved, make_home, one_call, start_upstream
from common import ledger_script, settle


def open_views(url: str, secret: str, count: int) -> tuple[list[int], threading.Event]:
    """``count`` live feeds, each read to the end by its own thread; their event counts."""
    seen = [0] * count
    stop = threading.Event()
    ready = threading.Barrier(count + 1)

    def read(index: int) -> None:
        headers = {"authorization": f"Bearer {secret}"}
        wait = httpx.Timeout(30.0, read=3600.0)
        with httpx.stream("GET", f"{url}/console/api/live", headers=headers,
                          timeout=wait) as feed:  # fmt: skip
            ready.wait()
            for line in feed.iter_lines():
                if stop.is_set():
                    return
                if line.startswith("data:"):
                    seen[index] += 1

    for index in range(count):
        threading.Thread(target=read, args=(index,), daemon=True).start()
    ready.wait(60)
    return seen, stop


def added(upstream: str, gateway: str, count: int) -> tuple[float, float]:
    """The gateway's p50 and the upstream's, interleaved (ms)."""
    direct, through = interleaved([upstream, gateway], count, one_call)
    return statistics.median(through), statistics.median(direct)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=50)
    parser.add_argument("--calls", type=int, default=300)
    options = parser.parse_args()
    upstream_proc, upstream = start_upstream()
    home = make_home(Path(tempfile.mkdtemp(prefix="bench-live-")), upstream, "100000")
    issued = subprocess.run([ledger_script(), "--home", str(home), "keys", "issue", "ops",
                             "--role", "viewer"], capture_output=True, text=True, check=True)  # fmt: skip
    secret = json.loads(issued.stdout)["key"]
    gateway = Gateway(home)
    calls(gateway.url, 5)  # the first calls make the state's MAC key and the lock
    settle()
    console, url = start_console(home)
    rows = []
    try:
        through, direct = added(upstream, gateway.url, options.calls)
        rows.append(("no live view", through, direct))
        seen, stop = open_views(url, secret, options.views)
        through, direct = added(upstream, gateway.url, options.calls)
        rows.append((f"{options.views} live views", through, direct))
        stop.set()
        events = sum(seen)
        through, direct = added(upstream, gateway.url, options.calls)
        rows.append(("no live view again", through, direct))
    finally:
        console.terminate()
        gateway.stop()
        upstream_proc.terminate()
    print(f"{'':22}{'gateway p50':>12}{'upstream p50':>14}{'added':>9}")
    for name, through, direct in rows:
        print(f"{name:22}{through:10.2f} ms{direct:12.2f} ms{through - direct:7.2f} ms")
    base = statistics.mean([rows[0][1] - rows[0][2], rows[2][1] - rows[2][2]])
    ratio = (rows[1][1] - rows[1][2]) / base
    print(f"events received by the views: {events} (about {events // max(1, options.views)} each)")
    print(f"added latency with the views open: {ratio:.2f}x of none (goal <= 1.1x)")
    sys.exit(0 if ratio <= 1.1 else 1)


if __name__ == "__main__":
    main()
