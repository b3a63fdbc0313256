"""The gateway (`ledger proxy`) against a local upstream: what it adds, and how it holds a budget.

    python bench/bench_gateway.py [--quick] [--out DIR]

Everything runs on loopback: the local upstream of the gateway tests
(``tests/fakes/provider.py``, Anthropic-shaped answers), a real ``ledger proxy``
process, and the clients here. Each gateway is measured once the files its
decisions read have settled (``common.settle``, after its first calls): a gateway
in service is long past that point, and before it every decision reads them
again. Figures printed:

* non-streaming call latency, direct to the upstream, through the floor (a bare
  starlette + uvicorn + httpx pass-through, ``floor_proxy.py``: the same web stack
  doing nothing else) and through the gateway, measured interleaved in one run
  (p50/p99, sequential keep-alive calls), and the p50 each adds;
* time to the first streamed byte, direct, through the floor and through the gateway;
* 16 concurrent clients: calls/s through the floor and through the gateway;
* sealed entries per fsync at concurrency 1 and with 64 concurrent clients
  (decisions and records per group commit, from the gateway's log);
* the gateway's RSS after 1k and after 10k calls (2k/500 with --quick);
* a Bedrock stream beside an Anthropic one (``gateway_bedrock.py``): what the
  gateway adds to each, whole stream and first byte, both with gateway keys;
* the runaway loop: 8 agent loops streaming through the gateway as fast as they
  can against a $1 daily cap, a file observer answering fresh readings; the
  spend recorded when every loop has been halted, as % of the cap.
"""

import argparse
import asyncio
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from common import REPO, ledger_script, out_dir, settle

ANTHROPIC = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
_LISTENING = re.compile(r"listening on http://([^\s]+) ")
_STOPPED = re.compile(r"after (\d+) decisions and records in (\d+) batches")


def body(*, stream: bool, max_tokens: int = 1024) -> bytes:
    return json.dumps(
        {"model": "claude-bench", "max_tokens": max_tokens, "stream": stream,
         "messages": [{"role": "user", "content": "Summarise the design doc in three lines."}]}
    ).encode()  # fmt: skip


def start_upstream() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.provider"],
        cwd=REPO, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    port = proc.stdout.readline().strip() if proc.stdout is not None else ""
    check(port.isdigit(), f"the upstream did not start: {port!r}")
    return proc, f"http://127.0.0.1:{port}"


def make_home(root: Path, upstream: str, cap: str, observer_file: Path | None = None) -> Path:
    home = root / f"home-{time.monotonic_ns()}"
    subprocess.run([ledger_script(), "--home", str(home), "init"], check=True,
                   capture_output=True)  # fmt: skip
    observer = ""
    if observer_file is not None:
        script = REPO / "observers" / "file_observer.py"
        observer = (
            f'[observer]\ncommand = ["{sys.executable}", "{script}", "--file", "{observer_file}"]\n'
        )
    (home / "ledger.toml").write_text(
        f"[usd]\ndaily_cap = {cap}\n\n{observer}\n"
        f'[proxy.upstream]\nanthropic = "{upstream}"\nopenai = "{upstream}"\n\n'
        '[prices."anthropic/claude-bench"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n'
    )
    return home


class Gateway:
    """``ledger proxy`` on a free port: the installed launcher, or ``command`` with ``env``."""

    def __init__(
        self, home: Path, command: list[str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            [*(command or [ledger_script()]), "--home", str(home), "proxy",
             "--listen", "127.0.0.1:0"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        stderr = self.proc.stderr
        check(stderr is not None, "no gateway log")
        # The gateway names its upstreams first, then where it listens.
        first, found = "", None
        for _ in range(20):
            first = stderr.readline() if stderr is not None else ""
            found = _LISTENING.search(first)
            if found is not None or not first:
                break
        if found is None:
            raise SystemExit(f"the gateway did not start: {first}")
        self.url = f"http://{found.group(1)}"
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        if self.proc.stderr is not None:
            self.lines.extend(line.rstrip("\n") for line in self.proc.stderr)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self) -> tuple[int, int]:
        """SIGTERM; the decisions and records it sealed, and in how many group commits."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)
        self._reader.join(timeout=30)
        for line in self.lines:
            found = _STOPPED.search(line)
            if found:
                return int(found.group(1)), int(found.group(2))
        return 0, 0


def settled(gateway: "Gateway") -> "Gateway":
    """``gateway`` once the files made by ``init`` and by its first calls have settled."""
    calls(gateway.url, 5)  # the first calls make the state's MAC key and the lock
    settle()
    return gateway


class Floor:
    """The bare pass-through (``floor_proxy.py``) in front of the same upstream."""

    def __init__(self, upstream: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("floor_proxy.py")), upstream],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        first = self.proc.stdout.readline() if self.proc.stdout is not None else ""
        found = re.search(r"listening on (http://\S+)", first)
        check(found is not None, f"the floor did not start: {first!r}")
        self.url = found.group(1) if found else ""

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def start_peers(names: list[str], upstream_url: str) -> list[Any]:
    """The optional peers asked for, running (``bench/peers/``; never installed here)."""
    running: list[Any] = []
    if "litellm" in names:
        sys.path.insert(0, str(Path(__file__).with_name("peers")))
        import litellm_peer

        check(litellm_peer.installed(), "run bench/peers/litellm_peer.py --install first")
        running.append(litellm_peer.LiteLLM(upstream_url, free_port()))
    return running


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def check(ok: bool, what: object) -> None:
    """Stop the benchmark: a figure measured on failing calls would mean nothing."""
    if not ok:
        raise SystemExit(f"bench_gateway: {what}")


def percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def one_call(client: httpx.Client) -> float:
    began = time.perf_counter()
    response = client.post("/v1/messages", content=body(stream=False))
    elapsed = time.perf_counter() - began
    check(response.status_code == 200, response.text)
    return elapsed * 1000


def one_first_byte(client: httpx.Client) -> float:
    began = time.perf_counter()
    with client.stream("POST", "/v1/messages", content=body(stream=True)) as response:
        chunks = response.iter_raw()
        next(chunks)
        elapsed = time.perf_counter() - began
        for _ in chunks:
            pass
    return elapsed * 1000


def interleaved(bases: list[str], count: int, one: Any, warm: int = 20) -> list[list[float]]:
    """``count`` samples of ``one`` per base, taken in turns of 10, so load hits all alike."""
    clients = [httpx.Client(base_url=base, headers=ANTHROPIC) for base in bases]
    samples: list[list[float]] = [[] for _ in bases]
    try:
        for client in clients:
            for _ in range(warm):  # connections, imports, first fsyncs
                one(client)
        while len(samples[0]) < count:
            for client, kept in zip(clients, samples, strict=True):
                kept.extend(one(client) for _ in range(10))
    finally:
        for client in clients:
            client.close()
    return samples


async def _concurrent(base: str, clients: int, calls_each: int) -> float:
    # One client (one connection) each: httpx's pool walks all its connections
    # for every request, so one pool of 64 spends more than the proxies measured.
    async def loop() -> None:
        async with httpx.AsyncClient(base_url=base, headers=ANTHROPIC) as client:
            await client.post("/v1/messages", content=body(stream=False))  # connected
            await connected.wait()  # all start together
            for _ in range(calls_each):
                response = await client.post("/v1/messages", content=body(stream=False))
                check(response.status_code == 200, response.text)

    connected = asyncio.Barrier(clients + 1)
    tasks = [asyncio.ensure_future(loop()) for _ in range(clients)]
    await connected.wait()
    began = time.perf_counter()
    await asyncio.gather(*tasks)
    return clients * calls_each / (time.perf_counter() - began)


def calls(base: str, count: int) -> None:
    with httpx.Client(base_url=base, headers=ANTHROPIC) as client:
        for _ in range(count):
            client.post("/v1/messages", content=body(stream=False))


def against_the_floor(
    root: Path, upstream_url: str, floor: Floor, sequential: int, peers: dict[str, str]
) -> None:
    """Latency and first byte, direct, via the floor, the gateway and any peer, interleaved."""
    gateway = settled(Gateway(make_home(root, upstream_url, "1000000")))
    bases = [upstream_url, floor.url, gateway.url, *peers.values()]
    direct, floored, proxied, *peered = interleaved(bases, sequential, one_call)
    print(
        f"non-streaming direct     : p50 {statistics.median(direct):.2f} ms, "
        f"p99 {percentile(direct, 99):.2f} ms ({sequential} sequential calls, interleaved)"
    )
    print(
        f"non-streaming via floor  : p50 {statistics.median(floored):.2f} ms, "
        f"p99 {percentile(floored, 99):.2f} ms"
    )
    print(
        f"non-streaming via gateway: p50 {statistics.median(proxied):.2f} ms, "
        f"p99 {percentile(proxied, 99):.2f} ms"
    )
    added = statistics.median(proxied) - statistics.median(direct)
    floor_added = statistics.median(floored) - statistics.median(direct)
    print(
        f"added by the gateway     : p50 {added:.2f} ms "
        f"(the floor adds {floor_added:.2f} ms; {added / max(floor_added, 0.01):.2f}x)"
    )
    for name, samples in zip(peers, peered, strict=True):
        print(
            f"peer {name:<20}: p50 {statistics.median(samples):.2f} ms, "
            f"p99 {percentile(samples, 99):.2f} ms (adds "
            f"{statistics.median(samples) - statistics.median(direct):.2f} ms; no budget enforced)"
        )
    ttfb_direct, ttfb_floor, ttfb_proxied, *_ = interleaved(
        bases, sequential // 2, one_first_byte, warm=10
    )
    ttfb_ratio = statistics.median(ttfb_proxied) / statistics.median(ttfb_floor)
    print(
        f"first streamed byte      : direct p50 {statistics.median(ttfb_direct):.2f} ms, "
        f"via floor p50 {statistics.median(ttfb_floor):.2f} ms, "
        f"via gateway p50 {statistics.median(ttfb_proxied):.2f} ms ({ttfb_ratio:.2f}x floor)"
    )
    jobs, batches = gateway.stop()
    print(
        f"1 client                 : {jobs / max(batches, 1):.2f} sealed entries per fsync "
        f"({jobs} entries in {batches} group commits)"
    )


def sixteen_clients(root: Path, upstream_url: str, floor: Floor, each: int) -> None:
    """16 clients through the floor and through the gateway, interleaved; stops the floor."""
    gateway = settled(Gateway(make_home(root, upstream_url, "1000000")))
    floor_rate = gateway_rate = 0.0
    for _ in range(2):  # interleaved: floor, gateway, floor, gateway; the better of each
        floor_rate = max(floor_rate, asyncio.run(_concurrent(floor.url, 16, each)))
        gateway_rate = max(gateway_rate, asyncio.run(_concurrent(gateway.url, 16, each)))
    gateway.stop()
    floor.stop()
    print(
        f"16 concurrent clients    : floor {floor_rate:.0f} calls/s, gateway "
        f"{gateway_rate:.0f} gated calls/s ({100 * gateway_rate / floor_rate:.0f} % of the floor)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--peer",
        choices=["litellm"],
        action="append",
        default=[],
        help="also measure this peer (bench/peers/; installed only when asked)",
    )
    parser.add_argument("--bedrock-only", action="store_true", help="only the Bedrock row")
    args = parser.parse_args()
    sequential = 200 if args.quick else 1000
    small, large = (500, 2000) if args.quick else (1000, 10_000)
    root = Path(tempfile.mkdtemp(prefix="bench-gateway-", dir=out_dir(args.out)))
    upstream, upstream_url = start_upstream()
    try:
        from gateway_bedrock import bedrock_beside_anthropic
        from gateway_runaway import runaway_row

        if args.bedrock_only:
            bedrock_beside_anthropic(root, upstream_url, sequential // 2)
            return
        floor = Floor(upstream_url)
        running = []
        try:
            running = start_peers(args.peer, upstream_url)
            peers = {name: peer.url for name, peer in zip(args.peer, running, strict=True)}
            against_the_floor(root, upstream_url, floor, sequential, peers)
        except BaseException:
            floor.stop()
            raise
        finally:
            for peer in running:
                peer.stop()

        each = 20 if args.quick else 50
        sixteen_clients(root, upstream_url, floor, each)

        gateway = settled(Gateway(make_home(root, upstream_url, "1000000")))
        rate = asyncio.run(_concurrent(gateway.url, 64, each))
        jobs, batches = gateway.stop()
        print(
            f"64 concurrent clients    : {rate:.0f} gated calls/s, "
            f"{jobs / max(batches, 1):.1f} sealed entries per fsync "
            f"({jobs} entries in {batches} group commits)"
        )

        bedrock_beside_anthropic(root, upstream_url, sequential // 2)

        gateway = Gateway(make_home(root, upstream_url, "1000000"))
        calls(gateway.url, small)
        rss_small = gateway.rss_kib()
        calls(gateway.url, large - small)
        rss_large = gateway.rss_kib()
        gateway.stop()
        print(
            f"gateway RSS              : {rss_small / 1024:.1f} MiB after {small} calls, "
            f"{rss_large / 1024:.1f} MiB after {large} ({rss_large / rss_small:.2f}x)"
        )

        runaway_row(root, upstream_url)
    finally:
        upstream.kill()
        upstream.wait()


if __name__ == "__main__":
    main()
