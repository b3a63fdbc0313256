"""A fleet of gateways on one PostgreSQL store beside ``pgbench -N`` (not a test, prints a report).

    python bench/bench_pg_fleet.py            # 10 s windows
    python bench/bench_pg_fleet.py --quick    # 3 s windows

Starts a throw-away PostgreSQL server (Unix socket only, ``fsync=on``) and the
local upstream of the gateway tests, then in the same run:

1. ``pgbench -c 8 -j 2 -T S -N`` TPS on that server: the limit;
2. the floor: four bare pass-throughs of the gateway's web stack
   (``floor_proxy.py``) under the same clients: the calls/s this machine
   reaches before any gateway does any work of its own, so the most a fleet of
   gateways could reach here, whatever the store;
3. four gateway hosts (four ``ledger proxy`` processes, each with its own home,
   all on one schema of that server) under 8 concurrent clients each: model
   calls/s, and durable decisions/s (a call is two: its verdict before it is
   forwarded and its record after), with the decisions per commit the
   gateways reported;
4. where the time went: CPU per call of the gateways, the server, the clients
   (this process) and the upstream, for the floor and for the fleet; the
   statements the server ran per decision and how many hosts were waiting
   for the fleet-wide lock on average (``pg_stat_statements``).

The goal is the fleet's decisions/s >= 50 % of pgbench's TPS. The floor line
says whether that is within this machine's reach at all: every process here
shares its cores.
"""

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg
from bench_gateway import ANTHROPIC, Floor, Gateway, body, start_upstream
from bench_pg import pgbench, start_server, stop_server
from common import ledger_script

REPO = Path(__file__).resolve().parent.parent
HOSTS = 4
CLIENTS_PER_HOST = 8
TICK = os.sysconf("SC_CLK_TCK")


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


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU the processes have used so far."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def server_pids(data_dir: Path) -> list[int]:
    """The postmaster and every process it forked (the gateways' backends among them)."""
    main = int((data_dir / "postmaster.pid").read_text().split()[0])
    found = subprocess.run(["pgrep", "-P", str(main)], capture_output=True, text=True, check=False)
    return [main, *map(int, found.stdout.split())]


class Measured:
    """Calls/s and CPU per call of one group of processes under the clients."""

    def __init__(self, label: str, calls: int, seconds: float, cpu: dict[str, float]) -> None:
        self.label, self.rate = label, calls / seconds
        self.per_call = {name: 1000 * used / max(1, calls) for name, used in cpu.items()}

    def cpu_line(self) -> str:
        parts = ", ".join(f"{name} {ms:.2f}" for name, ms in self.per_call.items())
        return f"{self.label:<9}: {parts}; total {sum(self.per_call.values()):.2f}"


def measure(
    label: str, bases: list[str], seconds: float, processes: Callable[[], dict[str, list[int]]]
) -> Measured:
    asyncio.run(load(bases, 1.0))  # connections and caches warm
    pids = processes()  # once the gateways' database connections are open
    before = {name: cpu_seconds(group) for name, group in pids.items()}
    own = own_cpu_seconds()
    calls = asyncio.run(load(bases, seconds))
    used = {name: cpu_seconds(group) - before[name] for name, group in pids.items()}
    used["clients"] = own_cpu_seconds() - own
    return Measured(label, calls, seconds, used)


def statement_figures(url: str) -> tuple[int, float]:
    """Statements the server ran, and seconds spent waiting for the fleet lock, since reset."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()
    statements = sum(int(calls) for query, calls, _ in rows if "pg_stat_statements" not in query)
    waited = sum(ms for query, _, ms in rows if "pg_advisory_xact_lock" in query) / 1000
    return statements, waited


def reset_statements(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("SELECT pg_stat_statements_reset()")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seconds = 3 if args.quick else 10
    root = Path(tempfile.mkdtemp(prefix="ledger-pgfleet-"))
    work = Path(tempfile.mkdtemp(prefix="ledger-bench-pgfleet-", dir=REPO / "bench" / "out"))
    upstream, upstream_url = start_upstream()
    gateways: list[Gateway] = []
    floors: list[Floor] = []
    try:
        socket_dir = start_server(root, statement_stats=True)
        url = f"postgresql://postgres@/postgres?host={socket_dir}"
        print(f"server: PostgreSQL at {socket_dir} (Unix socket, fsync=on); {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        tps = pgbench(socket_dir, seconds)
        print(f"pgbench -c 8 -j 2 -T {seconds} -N  : {tps:,.1f} tps")

        floors = [Floor(upstream_url) for _ in range(HOSTS)]
        floor = measure("floor", [f.url for f in floors], seconds,
                        lambda: {"proxies": [f.proc.pid for f in floors],
                                 "upstream": [upstream.pid]})  # fmt: skip
        for proxy in floors:
            proxy.stop()
        floors = []
        print(f"floor, {HOSTS} bare pass-throughs  : {floor.rate:,.1f} calls/s, the most "
              f"{HOSTS * CLIENTS_PER_HOST} clients reach here with no gateway work: "
              f"{2 * floor.rate:,.1f} decisions/s if each were gated "
              f"({100 * 2 * floor.rate / tps:.1f} % of pgbench)")  # fmt: skip

        gateways = [Gateway(home) for home in make_hosts(work, url, upstream_url)]
        reset_statements(url)
        fleet = measure("pg fleet", [g.url for g in gateways], seconds,
                        lambda: {"gateways": [g.proc.pid for g in gateways],
                                 "server": server_pids(root / "data"),
                                 "upstream": [upstream.pid]})  # fmt: skip
        statements, waited = statement_figures(url)
        calls = fleet.rate
        print(
            f"pg fleet, {HOSTS} gateway hosts      : {calls:,.1f} calls/s, {2 * calls:,.1f} "
            f"decisions/s ({100 * 2 * calls / tps:.1f} % of pgbench), "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        print(f"pg fleet, share of the floor     : {100 * calls / floor.rate:.1f} % of its calls/s")
        stopped = [gateway.stop() for gateway in gateways]
        gateways = []
        jobs, batches = sum(s[0] for s in stopped), sum(s[1] for s in stopped)
        print(f"pg fleet, decisions per commit   : {jobs / max(1, batches):.2f} "
              f"({jobs} in {batches} batches)")  # fmt: skip
        # Statements include the warm-up second; the lock wait is over the window.
        print(f"pg fleet, statements per decision: {statements / max(1, jobs):.2f} "
              f"(pipelined: a batch waits for the server at its start, its commit and "
              f"once per record's key lookup)")  # fmt: skip
        print(f"pg fleet, hosts waiting for lock : {waited / (seconds + 1):.2f} on average "
              f"(of {HOSTS})")  # fmt: skip
        print("cpu ms per call (user+system):")
        print(f"  {floor.cpu_line()}")
        print(f"  {fleet.cpu_line()}")
    finally:
        for gateway in gateways:
            gateway.stop()
        for proxy in floors:
            proxy.stop()
        upstream.terminate()
        upstream.wait(timeout=30)
        stop_server(root)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
