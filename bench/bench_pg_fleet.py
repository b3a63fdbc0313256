"""A fleet of gateways on one PostgreSQL store beside ``pgbench -N`` (not a test, prints a report).

    python bench/bench_pg_fleet.py            # 10 s windows
    python bench/bench_pg_fleet.py --quick    # 3 s windows

Starts a throw-away PostgreSQL server (Unix socket only, ``fsync=on``) and the
local upstream of the gateway tests, then in the same run:

1. ``pgbench -c 8 -j 2 -T S -N`` TPS on that server: the limit;
2. four gateway hosts (four ``ledger proxy`` processes, each with its own home,
   all on one schema of that server) under 8 concurrent clients each: model
   calls/s, and durable decisions/s (a call is two: its verdict before it is
   forwarded and its record after), with the decisions per commit the
   gateways reported.

The goal is the fleet's decisions/s >= 50 % of pgbench's TPS.
"""

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from bench_gateway import ANTHROPIC, Gateway, body, start_upstream
from bench_pg import pgbench, start_server, stop_server
from common import ledger_script

REPO = Path(__file__).resolve().parent.parent
HOSTS = 4
CLIENTS_PER_HOST = 8


def make_hosts(root: Path, url: str, upstream: str) -> list[Path]:
    homes = [root / f"host{index}" for index in range(HOSTS)]
    env = {**os.environ, "LEDGER_STORE_URL": url, "LEDGER_STORE_SCHEMA": "fleet"}
    for index, home in enumerate(homes):
        if index:  # what an operator does before a new host's init
            (home / "keys").mkdir(parents=True, mode=0o700)
            secret = home / "keys" / "fleet.secret"
            secret.write_bytes((homes[0] / "keys" / "fleet.secret").read_bytes())
            secret.chmod(0o600)
        subprocess.run([ledger_script(), "--home", str(home), "init", "--daily-cap-usd",
                        "1000000000"], check=True, capture_output=True, env=env)  # fmt: skip
        (home / "ledger.toml").write_text(
            "[usd]\ndaily_cap = 1000000000\n\n[billing]\nstale_halt_pct = 100\n\n"
            f'[store]\nurl = "{url}"\nschema = "fleet"\n\n'
            f'[proxy.upstream]\nanthropic = "{upstream}"\nopenai = "{upstream}"\n\n'
            '[prices."anthropic/claude-bench"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n'
        )
    return homes


async def load(bases: list[str], seconds: float) -> int:
    """Calls answered 200 by all gateways together within ``seconds``."""
    done = 0
    end = time.perf_counter() + seconds

    async def loop(client: httpx.AsyncClient) -> None:
        nonlocal done
        while time.perf_counter() < end:
            response = await client.post("/v1/messages", content=body(stream=False))
            if response.status_code != 200:
                raise SystemExit(f"bench_pg_fleet: a call failed: {response.text}")
            done += 1

    clients = [
        httpx.AsyncClient(base_url=base, headers=ANTHROPIC, timeout=120,
                          limits=httpx.Limits(max_connections=CLIENTS_PER_HOST))
        for base in bases
    ]  # fmt: skip
    try:
        await asyncio.gather(*(loop(c) for c in clients for _ in range(CLIENTS_PER_HOST)))
    finally:
        for client in clients:
            await client.aclose()
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seconds = 3 if args.quick else 10
    root = Path(tempfile.mkdtemp(prefix="ledger-pgfleet-"))
    work = Path(tempfile.mkdtemp(prefix="ledger-bench-pgfleet-", dir=REPO / "bench" / "out"))
    upstream, upstream_url = start_upstream()
    gateways: list[Gateway] = []
    try:
        socket_dir = start_server(root)
        url = f"postgresql://postgres@/postgres?host={socket_dir}"
        print(f"server: PostgreSQL at {socket_dir} (Unix socket, fsync=on); {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        tps = pgbench(socket_dir, seconds)
        print(f"pgbench -c 8 -j 2 -T {seconds} -N  : {tps:,.1f} tps")
        gateways = [Gateway(home) for home in make_hosts(work, url, upstream_url)]
        bases = [gateway.url for gateway in gateways]
        asyncio.run(load(bases, 1.0))  # connections and caches warm
        calls = asyncio.run(load(bases, seconds)) / seconds
        print(
            f"pg fleet, {HOSTS} gateway hosts      : {calls:,.1f} calls/s, {2 * calls:,.1f} "
            f"decisions/s ({100 * 2 * calls / tps:.1f} % of pgbench), "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        stopped = [gateway.stop() for gateway in gateways]
        gateways = []
        jobs, batches = sum(s[0] for s in stopped), sum(s[1] for s in stopped)
        print(f"pg fleet, decisions per commit   : {jobs / max(1, batches):.2f} "
              f"({jobs} in {batches} batches)")  # fmt: skip
    finally:
        for gateway in gateways:
            gateway.stop()
        upstream.terminate()
        upstream.wait(timeout=30)
        stop_server(root)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
