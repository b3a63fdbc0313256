"""What the gateway adds to a call, against another checkout's gateway, in one run.

    python bench/bench_gateway_vs.py --vs /path/to/other/checkout [--calls 2000]

Two ``ledger proxy`` processes, this checkout's and the other's (each with a
home its own ``ledger init`` made, the same ``ledger.toml``), stand in front of
one local upstream (``tests/fakes/provider.py``). Sequential keep-alive calls
go direct, through this gateway and through the other, in turns of ten
(``bench_gateway.interleaved``), so a machine that slows down slows all three
alike. Printed: each one's p50 and p99, what each gateway adds to the direct
p50, and this gateway's added p50 over the other's (SPEC §21's goal for the
derived indexes: within 1.1x of the release before them). The same for the
time to the first streamed byte.

Each checkout runs as ``python -m ledger`` with only that checkout on
PYTHONPATH, from a folder outside both, so neither imports the other.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_gateway import (
    Gateway,
    interleaved,
    one_call,
    one_first_byte,
    percentile,
    settled,
    start_upstream,
)
from common import REPO


def _command(checkout: Path) -> tuple[list[str], dict[str, str]]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    env["PYTHONPATH"] = str(checkout)
    return [sys.executable, "-m", "ledger"], env


def _home(root: Path, name: str, command: list[str], env: dict[str, str], upstream: str) -> Path:
    home = root / name
    subprocess.run([*command, "--home", str(home), "init"], env=env, cwd=root, check=True,
                   capture_output=True)  # fmt: skip
    (home / "ledger.toml").write_text(
        f'[usd]\ndaily_cap = 1000000\n\n[proxy.upstream]\nanthropic = "{upstream}"\n\n'
        '[prices."anthropic/claude-bench"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n'
    )
    return home


def _row(label: str, samples: list[float], direct: float) -> str:
    p50 = statistics.median(samples)
    return (f"{label:<28}: p50 {p50:.2f} ms, p99 {percentile(samples, 99):.2f} ms, "
            f"adds {p50 - direct:.2f} ms")  # fmt: skip


def _compare(what: str, direct: list[float], this: list[float], other: list[float]) -> None:
    base = statistics.median(direct)
    print(f"{what + ' direct':<28}: p50 {base:.2f} ms, p99 {percentile(direct, 99):.2f} ms")
    print(_row(f"{what} this checkout", this, base))
    print(_row(f"{what} the other", other, base))
    added_this = statistics.median(this) - base
    added_other = max(statistics.median(other) - base, 0.01)
    print(f"{what + ' added':<28}: {added_this / added_other:.2f}x the other's (goal <= 1.1x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vs", type=Path, required=True, help="the other checkout")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per target")
    args = parser.parse_args()
    other = args.vs.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-gateway-vs-") as tmp:
        root = Path(tmp)
        os.chdir(root)  # ``python -m`` puts the current folder first on sys.path
        upstream, url = start_upstream()
        gateways: list[Gateway] = []
        try:
            for name, checkout in (("this", REPO), ("other", other)):
                command, env = _command(checkout)
                home = _home(root, name, command, env, url)
                gateways.append(settled(Gateway(home, command, env)))
            print(f"== gateway added latency: {REPO} against {other} ==")
            bases = [url, *(gateway.url for gateway in gateways)]
            direct, this, them = interleaved(bases, args.calls, one_call)
            _compare("non-streaming", direct, this, them)
            direct, this, them = interleaved(bases, args.calls // 2, one_first_byte, warm=10)
            _compare("first byte", direct, this, them)
        finally:
            for gateway in gateways:
                gateway.stop()
            upstream.terminate()
            upstream.wait(timeout=60)


if __name__ == "__main__":
    main()
