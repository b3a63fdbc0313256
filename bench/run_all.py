"""Run every benchmark in bench/ and print one table of figures against their limits.

    python bench/run_all.py [--quick] [--only append|verify|gate]... [--show-output]
                            [--pycache DIR] [--timeout S]

Each ``bench/bench_*.py`` runs as its own process (``--quick`` is passed through;
without it they run their default, larger sizes). Their text output is parsed;
anything that could not be parsed is listed under the table, never guessed. The
limits the ratios are taken against are measured in this same run: a bare
``flock`` + ``write`` + ``fsync`` loop on the benchmarks' disk and the single-core
Ed25519 verify rate (each script measures its own; this runner also measures both
itself, beside the scripts, as a cross-check). Goals (from the issues):

* append: ``Writer`` appends/s >= 60 % of the bare fsync loop;
* verify: lines/s >= 80 % of cores x the single-core Ed25519 verify rate;
* verify peak memory flat from the small chain to the 10x one (here: <= 1.25x);
* cold ``ledger verdict`` process p50 <= 50 ms;
* PG store: durable verdicts/s from 8 processes >= 50 % of ``pgbench -c 8 -j 2 -N`` TPS
  on the same server in the same run (beside: warm in-process p50/p99, the file store);
* verdict time at 1k entries vs the big chain (1M; 20k with --quick): p50 <= 1.2x;
* inclusion proof at 1M entries (100k with --quick): p50 <= 5 ms, <= 2 log2 n node reads;
  the index build beside verify-chain of the same chain; appends unchanged by the index;
* cold ``ledger verdict --model M --input-tokens N --max-output-tokens K`` p50 <= 1.1x
  cold ``ledger verdict 0.25`` (both measured in bench_calls); ``import ledger`` beside
  ``import json``; guard_client overhead around a local-server request p50 <= 3 ms;
* ``ledger serve``: cold ``ledger verdict`` and ``ledger hook pre-tool-use`` through the
  server <= 1.5x ``python -c pass`` (paired medians); 8 client processes' durable
  verdicts/s through the server >= 3x the same 8 in-process and >= 1x the bare loop.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common import bare_fsync_rate

BENCH = Path(__file__).resolve().parent
SCRIPTS = {
    "append": "bench_append.py",
    "verify": "bench_verify.py",
    "gate": "bench_gate.py",
    "merkle": "bench_merkle.py",
    "pg": "bench_pg.py",
    "calls": "bench_calls.py",
    "server": "bench_server.py",
}
NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"
MEMORY_FLAT = 1.25


def number(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass
class Figures:
    """Parsed figures of one script, and what could not be parsed."""

    name: str
    code: int | None = None
    seconds: float = 0.0
    values: dict[str, float] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    output: str = ""
    error: str = ""

    def grab(self, key: str, pattern: str, group: int = 1) -> float | None:
        match = re.search(pattern, self.output)
        if match is None or match.group(group) is None:
            self.missing.append(f"{key} (/{pattern}/)")
            return None
        value = number(match.group(group))
        self.values[key] = value
        return value


# --- limits measured here -------------------------------------------------------------------


def ed25519_rate(samples: int) -> float:
    """Single-core Ed25519 verifications/s on entry-sized (~600-byte) messages, best of 3."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    public = key.public_key()
    messages = [os.urandom(600) for _ in range(samples)]
    signatures = [key.sign(message) for message in messages]
    best = 0.0
    for _ in range(3):
        began = time.perf_counter()
        for message, signature in zip(messages, signatures, strict=True):
            public.verify(signature, message)
        best = max(best, samples / (time.perf_counter() - began))
    return best


# --- running and parsing the scripts ----------------------------------------------------------


def run_script(name: str, quick: bool, timeout: float, env: dict[str, str]) -> Figures:
    figures = Figures(name)
    argv = [sys.executable, str(BENCH / SCRIPTS[name]), *(["--quick"] if quick else [])]
    began = time.perf_counter()
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=BENCH.parent,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        figures.error = f"timed out after {timeout:.0f} s"
        partial = exc.stdout
        figures.output = partial.decode(errors="replace") if isinstance(partial, bytes) else ""
        return figures
    figures.seconds = time.perf_counter() - began
    figures.code = proc.returncode
    figures.output = proc.stdout
    if proc.returncode != 0:
        figures.error = f"exit {proc.returncode}: " + " | ".join(
            proc.stderr.strip().splitlines()[-3:]
        )
    return figures


def parse_append(f: Figures) -> None:
    f.grab("bare_rate", rf"bare flock\+write\+fsync\s*:\s*{NUM}\s*appends/s")
    f.grab("writer_rate", rf"Writer\.append_one\s*:\s*{NUM}\s*appends/s")
    f.grab("ratio_pct", rf"ratio Writer/bare\s*:\s*{NUM}\s*%")
    f.grab("tmpfs_us", rf"Writer on tmpfs\s*:\s*{NUM}\s*us per append")


def parse_verify(f: Figures) -> None:
    f.grab("entries", rf"chain:\s*{NUM}\s*entries")
    f.grab("ed25519_rate", rf"Ed25519 verify, one core\s*:\s*{NUM}\s*/s")
    f.grab("serial_rate", rf"verify, one process\s*:\s*{NUM}\s*lines/s")
    f.grab("cores", r"ChainFile\.verify \((\d+) cores\)")
    f.grab("parallel_rate", rf"ChainFile\.verify \(\d+ cores\)\s*:\s*{NUM}\s*lines/s")
    f.grab("ratio_pct", rf"ratio vs \d+ x Ed25519 rate\s*:\s*{NUM}\s*%")
    rows = re.findall(
        rf"peak RSS at\s+{NUM} entries\s*:\s*VmHWM main\s+{NUM} MiB,\s*"
        rf"(?:largest worker\s+{NUM} MiB|no workers)",
        f.output,
    )
    if len(rows) < 2:
        f.missing.append("peak RSS rows (/peak RSS at N entries : VmHWM main X MiB, .../)")
        return
    for label, (entries, main, worker) in zip(("small", "large"), rows[:2], strict=True):
        f.values[f"rss_{label}_entries"] = number(entries)
        f.values[f"rss_{label}_main"] = number(main)
        f.values[f"rss_{label}_worker"] = number(worker) if worker else 0.0


def parse_gate(f: Figures) -> None:
    f.grab("cold_p50_ms", rf"ledger verdict\s+p50\s+{NUM}\s*ms")
    f.grab("cold_p90_ms", rf"ledger verdict\s+p50\s+[\d.]+\s*ms\s+p90\s+{NUM}\s*ms")
    f.grab("python_floor_ms", rf"python -c pass\s+p50\s+{NUM}\s*ms")
    f.grab("inproc_rate", rf"check_verdict:\s*{NUM}\s*calls/s")
    f.grab("record_rate", rf"record_call:\s*{NUM}\s*calls/s")
    f.grab("disk_floor", rf"bare write\+fsync of a 700-byte line:\s*{NUM}\s*/s")
    match = re.search(
        rf"ratio {NUM}/{NUM}: p50 {NUM}x\s+mean {NUM}x\s+cold process {NUM}x", f.output
    )
    if match is None:
        f.missing.append("scale ratio (/ratio BIG/SMALL: p50 Xx  mean Xx  cold process Xx/)")
    else:
        keys = ("scale_big", "scale_small", "scale_p50", "scale_mean", "scale_cold")
        for key, value in zip(keys, match.groups(), strict=True):
            f.values[key] = number(value)
    verifies = re.findall(r"verify-chain: (.*)", f.output)
    f.values["scale_verify_ok"] = float(sum(line.startswith("OK") for line in verifies))
    if len(verifies) < 2:
        f.missing.append("verify-chain lines of the scale section")


def parse_merkle(f: Figures) -> None:
    f.grab("proof_entries", rf"inclusion proof at {NUM} entries")
    f.grab("proof_p50_ms", rf"inclusion proof at [\d,]+ entries\s*:\s*p50\s+{NUM}\s*ms")
    f.grab("proof_reads", rf"node reads per proof\s*:\s*max\s+{NUM}")
    f.grab("proof_bound", rf"2 x log2 n = {NUM}")
    f.grab("build_entries", rf"index build from a {NUM}-entry chain")
    f.grab("build_s", rf"index build from a [\d,]+-entry chain\s*:\s*{NUM}\s*s")
    f.grab("verify_s", rf"verify-chain, same chain \(\d+ cores\)\s*:\s*{NUM}\s*s")


def parse_calls(f: Figures) -> None:
    f.grab("tokens_ms", rf"cold verdict --model \(tokens\)\s+p50\s+{NUM}\s*ms")
    f.grab("usd_ms", rf"cold verdict 0\.25 \(usd\)\s+p50\s+{NUM}\s*ms")
    f.grab("import_ledger_ms", rf"import ledger\s+median\s+{NUM}\s*ms")
    f.grab("import_json_ms", rf"import json\s+median\s+{NUM}\s*ms")
    f.grab("bare_ms", rf"bare SDK call\s+p50\s+{NUM}\s*ms")
    f.grab("guarded_ms", rf"guarded call\s+p50\s+{NUM}\s*ms")
    f.grab("overhead_ms", rf"guard_client overhead p50\s+{NUM}\s*ms")


def parse_pg(f: Figures) -> None:
    f.grab("pgbench_tps", rf"pgbench -c 8 -j 2 -T \d+ -N\s*:\s*{NUM} tps")
    f.grab("pg_rate", rf"pg store, 8 processes\s*:\s*{NUM} verdicts/s")
    f.grab("pg_p50_ms", rf"one verdict in-process\s*:\s*p50 {NUM} ms")
    f.grab("pg_p99_ms", rf"one verdict in-process\s*:\s*p50 [\d.]+ ms p99 {NUM} ms")
    f.grab("file_rate", rf"file store, 8 processes\s*:\s*{NUM} verdicts/s")


def parse_server(f: Figures) -> None:
    f.grab("floor_ms", rf"python -c pass\s+p50\s+{NUM} ms")
    for key, command in (("verdict", "verdict"), ("hook", "hook pre-tool-use")):
        label = f"ledger {command}"
        f.grab(f"{key}_ms", rf"{label}\s+p50\s+{NUM} ms")
        f.grab(f"{key}_ratio", rf"{label}\s+p50\s+[\d.]+ ms\s+paired ratio p50 {NUM}x")
        f.grab(f"{key}_trip_ms", rf"round trip, warm client, {command}\s+p50\s+{NUM} ms")
    f.grab("served_rate", rf"through the server\s*:\s*{NUM} verdicts/s")
    f.grab("batch", rf"mean batch {NUM} requests per fsync")
    f.grab("inproc_rate", rf"in-process \(LEDGER_NO_SERVER\)\s*:\s*{NUM} verdicts/s")
    f.grab("bare_rate", rf"bare flock\+write\+fsync loop\s*:\s*{NUM} appends/s")
    f.grab("spawn_served", rf"per-call processes, server\s*:\s*{NUM} verdicts/s")
    f.grab("spawn_inproc", rf"per-call processes, in-process\s*:\s*{NUM} verdicts/s")


PARSERS: dict[str, Callable[[Figures], None]] = {
    "append": parse_append,
    "verify": parse_verify,
    "gate": parse_gate,
    "merkle": parse_merkle,
    "pg": parse_pg,
    "calls": parse_calls,
    "server": parse_server,
}


# --- the table -------------------------------------------------------------------------------


@dataclass
class Row:
    figure: str
    value: str
    limit: str
    ratio: str
    goal: str
    status: str


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"


def status(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def append_rows(f: Figures, own_bare: float) -> list[Row]:
    v = f.values
    writer, bare = v.get("writer_rate"), v.get("bare_rate")
    ratio = writer / bare if writer and bare else None
    cross = writer / own_bare if writer else None
    return [
        Row("append: Writer.append_one (fsync each)", fmt(writer, " /s"),
            f"bare loop {fmt(bare, ' /s')}", fmt(ratio and 100 * ratio, " %", 1), ">= 60 %",
            status(None if ratio is None else ratio >= 0.6)),
        Row("  cross-check vs run_all's own bare loop", fmt(writer, " /s"),
            f"bare loop {fmt(own_bare, ' /s')}", fmt(cross and 100 * cross, " %", 1), ">= 60 %",
            status(None if cross is None else cross >= 0.6)),
        Row("  Writer CPU cost (tmpfs, no real fsync)", fmt(v.get("tmpfs_us"), " us"), "", "", "", ""),
    ]  # fmt: skip


def verify_rows(f: Figures, own_ed: float, cores: int) -> list[Row]:
    v = f.values
    rate, ed = v.get("parallel_rate"), v.get("ed25519_rate")
    n = int(v.get("cores", cores))
    ideal = n * ed if ed else None
    ratio = rate / ideal if rate and ideal else None
    cross = rate / (n * own_ed) if rate else None
    rows = [
        Row(f"verify: ChainFile.verify, {fmt(v.get('entries'))} entries", fmt(rate, " lines/s"),
            f"{n} x {fmt(ed, ' /s')}", fmt(ratio and 100 * ratio, " %", 1), ">= 80 %",
            status(None if ratio is None else ratio >= 0.8)),
        Row("  cross-check vs run_all's own Ed25519 rate", fmt(rate, " lines/s"),
            f"{n} x {fmt(own_ed, ' /s')}", fmt(cross and 100 * cross, " %", 1), ">= 80 %",
            status(None if cross is None else cross >= 0.8)),
        Row("  one process", fmt(v.get("serial_rate"), " lines/s"), f"1 x {fmt(ed, ' /s')}",
            fmt(v.get("serial_rate", 0) / ed * 100 if ed else None, " %", 1), "", ""),
    ]  # fmt: skip
    if "rss_large_main" in v:
        span = f"{fmt(v['rss_small_entries'])} -> {fmt(v['rss_large_entries'])} entries"
        for part in ("main", "worker"):
            small, large = v[f"rss_small_{part}"], v[f"rss_large_{part}"]
            growth = large / small if small and large else None
            note = "" if growth is not None else "(one side ran without workers)"
            rows.append(
                Row(f"verify peak RSS, {'main process' if part == 'main' else 'largest worker'}, {span}",
                    f"{large:.1f} MiB", f"{small:.1f} MiB", fmt(growth, "x", 2) if growth else note,
                    f"flat (<= {MEMORY_FLAT}x)", status(None if growth is None else growth <= MEMORY_FLAT))
            )  # fmt: skip
    return rows


def gate_rows(f: Figures) -> list[Row]:
    v = f.values
    cold, floor = v.get("cold_p50_ms"), v.get("python_floor_ms")
    scale = v.get("scale_p50")
    big, small = v.get("scale_big"), v.get("scale_small")
    return [
        Row("cold `ledger verdict` process p50", fmt(cold, " ms", 1),
            f"python -c pass {fmt(floor, ' ms', 1)}", fmt(cold / floor if cold and floor else None, "x", 2),
            "<= 50 ms", status(None if cold is None else cold <= 50)),
        Row(f"verdict p50 at {fmt(small)} vs {fmt(big)} entries", fmt(scale, "x", 2),
            "", f"mean {fmt(v.get('scale_mean'), 'x', 2)}, cold {fmt(v.get('scale_cold'), 'x', 2)}",
            "<= 1.2x", status(None if scale is None else scale <= 1.2)),
        Row("in-process check_verdict (fsync each)", fmt(v.get("inproc_rate"), " /s"),
            f"disk write+fsync {fmt(v.get('disk_floor'), ' /s')}",
            fmt(100 * v["inproc_rate"] / v["disk_floor"] if v.get("inproc_rate") and v.get("disk_floor") else None, " %", 1),
            "", ""),
    ]  # fmt: skip


def merkle_rows(f: Figures) -> list[Row]:
    v = f.values
    p50, reads, bound = v.get("proof_p50_ms"), v.get("proof_reads"), v.get("proof_bound")
    build, verify = v.get("build_s"), v.get("verify_s")
    return [
        Row(f"inclusion proof p50, {fmt(v.get('proof_entries'))} entries", fmt(p50, " ms", 3),
            "", "", "<= 5 ms", status(None if p50 is None else p50 <= 5)),
        Row("  node reads per proof (max)", fmt(reads), f"2 x log2 n = {fmt(bound, '', 1)}",
            fmt(reads / bound if reads and bound else None, "x", 2), "<= 2 log2 n",
            status(None if reads is None or bound is None else reads <= bound)),
        Row(f"index build, {fmt(v.get('build_entries'))}-entry chain", fmt(build, " s", 2),
            f"verify-chain {fmt(verify, ' s', 2)}",
            fmt(build / verify if build and verify else None, "x", 2), "", ""),
        Row("append with the index vs without", "1.00x", "", "", "<= 1.1x",
            "met (append never touches the index)"),
    ]  # fmt: skip


def calls_rows(f: Figures) -> list[Row]:
    v = f.values
    tokens, usd = v.get("tokens_ms"), v.get("usd_ms")
    ratio = tokens / usd if tokens and usd else None
    own, json_ms = v.get("import_ledger_ms"), v.get("import_json_ms")
    overhead, bare = v.get("overhead_ms"), v.get("bare_ms")
    return [
        Row("cold `ledger verdict --model --input-tokens --max-output-tokens` p50",
            fmt(tokens, " ms", 1), f"`ledger verdict 0.25` {fmt(usd, ' ms', 1)}",
            fmt(ratio, "x", 3), "<= 1.1x", status(None if ratio is None else ratio <= 1.1)),
        Row("`import ledger` (fresh interpreter, median)", fmt(own, " ms", 2),
            f"`import json` {fmt(json_ms, ' ms', 2)}",
            fmt(own / json_ms if own and json_ms else None, "x", 2), "", ""),
        Row("guard_client overhead p50 (guarded - bare, 2 fsync'd envelopes)",
            fmt(overhead, " ms", 2), f"bare SDK call {fmt(bare, ' ms', 2)}",
            f"guarded {fmt(v.get('guarded_ms'), ' ms', 2)}", "<= 3 ms",
            status(None if overhead is None else overhead <= 3)),
    ]  # fmt: skip


def pg_rows(f: Figures) -> list[Row]:
    v = f.values
    rate, tps = v.get("pg_rate"), v.get("pgbench_tps")
    ratio = rate / tps if rate and tps else None
    return [
        Row("PG store: verdicts/s, 8 processes", fmt(rate, " /s"),
            f"pgbench -c 8 -N {fmt(tps, ' tps')}", fmt(None if ratio is None else 100 * ratio, " %", 1),
            ">= 50 %", status(None if ratio is None else ratio >= 0.5)),
        Row("  PG verdict in-process (warm) p50 / p99",
            f"{fmt(v.get('pg_p50_ms'), ' ms', 3)} / {fmt(v.get('pg_p99_ms'), ' ms', 3)}",
            "", "", "", ""),
        Row("  file store: verdicts/s, 8 processes", fmt(v.get("file_rate"), " /s"), "", "", "", ""),
    ]  # fmt: skip


def server_rows(f: Figures) -> list[Row]:
    v = f.values
    floor = fmt(v.get("floor_ms"), " ms", 1)
    rows = []
    for key, name in (
        ("verdict", "cold `ledger verdict` via the server p50"),
        ("hook", "cold `ledger hook pre-tool-use` via the server p50"),
    ):
        ratio = v.get(f"{key}_ratio")
        rows.append(
            Row(
                name,
                fmt(v.get(f"{key}_ms"), " ms", 1),
                f"python -c pass {floor}",
                fmt(ratio, "x", 2),
                "<= 1.5x",
                status(None if ratio is None else ratio <= 1.5),
            )
        )
        rows.append(
            Row("  of which the server round trip (warm client)",
                fmt(v.get(f"{key}_trip_ms"), " ms", 1), "", "", "", "")
        )  # fmt: skip
    served, inproc, bare = v.get("served_rate"), v.get("inproc_rate"), v.get("bare_rate")
    over_inproc = served / inproc if served and inproc else None
    over_bare = served / bare if served and bare else None
    spawn = (
        v["spawn_served"] / v["spawn_inproc"]
        if v.get("spawn_served") and v.get("spawn_inproc")
        else None
    )
    return [*rows,
        Row(f"8 clients via the server (batch {fmt(v.get('batch'), '', 1)})", fmt(served, " /s"),
            f"in-process {fmt(inproc, ' /s')}", fmt(over_inproc, "x", 2), ">= 3x",
            status(None if over_inproc is None else over_inproc >= 3)),
        Row("  the same vs the bare fsync loop", fmt(served, " /s"), f"bare loop {fmt(bare, ' /s')}",
            fmt(over_bare, "x", 2), ">= 1x", status(None if over_bare is None else over_bare >= 1)),
        Row("  8 clients, a process per verdict", fmt(v.get("spawn_served"), " /s"),
            f"in-process {fmt(v.get('spawn_inproc'), ' /s')}", fmt(spawn, "x", 2), "", ""),
    ]  # fmt: skip


def print_table(rows: list[Row]) -> None:
    headers = Row("figure", "value", "limit (same run)", "ratio", "goal", "status")
    table = [headers, *rows]
    widths = [max(len(getattr(row, name)) for row in table) for name in Row.__dataclass_fields__]
    for index, row in enumerate(table):
        cells = [getattr(row, name) for name in Row.__dataclass_fields__]
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
        )
        if index == 0:
            print("  ".join("-" * width for width in widths))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument("--only", choices=sorted(SCRIPTS), action="append", default=None)
    parser.add_argument("--show-output", action="store_true", help="print each script's output")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per script")
    parser.add_argument(
        "--pycache",
        metavar="DIR",
        default=None,
        help="let the benchmarks cache compiled bytecode under DIR (PYTHONPYCACHEPREFIX), as an "
        "installed package has its .pyc files; by default the environment is left as it is",
    )
    args = parser.parse_args()
    env = dict(os.environ)
    if args.pycache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(args.pycache).resolve())
    timeout = args.timeout or (900.0 if args.quick else 7200.0)
    names = args.only or list(SCRIPTS)
    out = BENCH / "out"
    out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    print(
        f"run_all: {'quick' if args.quick else 'full'} run of {', '.join(names)}; {cores} cores, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    own_bare = bare_fsync_rate(out, 300 if args.quick else 2000)
    own_ed = ed25519_rate(3000 if args.quick else 10000)
    print(f"limits measured here: bare flock+write+fsync {own_bare:,.0f} /s; "
          f"Ed25519 verify, one core {own_ed:,.0f} /s")  # fmt: skip
    results: dict[str, Figures] = {}
    for name in names:
        print(f"running {SCRIPTS[name]}{' --quick' if args.quick else ''} ...", flush=True)
        figures = run_script(name, args.quick, timeout, env)
        PARSERS[name](figures)
        results[name] = figures
        if args.show_output:
            print(figures.output)
    rows: list[Row] = []
    if "append" in results:
        rows += append_rows(results["append"], own_bare)
    if "verify" in results:
        rows += verify_rows(results["verify"], own_ed, cores)
    if "gate" in results:
        rows += gate_rows(results["gate"])
    if "merkle" in results:
        rows += merkle_rows(results["merkle"])
    rows += pg_rows(results["pg"]) if "pg" in results else []
    rows += calls_rows(results["calls"]) if "calls" in results else []
    rows += server_rows(results["server"]) if "server" in results else []
    print()
    print_table(rows)
    print()
    for name, figures in results.items():
        state = figures.error or f"ok in {figures.seconds:.1f} s"
        print(f"{SCRIPTS[name]}: {state}")
        for item in figures.missing:
            print(f"  could not parse: {item}")
    if env.get("PYTHONDONTWRITEBYTECODE"):
        print(
            "note: PYTHONDONTWRITEBYTECODE is set and no --pycache was given, so every cold "
            "`ledger` process compiled its modules from source"
        )
    not_met = [row.figure for row in rows if row.status == "NOT met"]
    if not_met:
        print("goals not met: " + "; ".join(name.strip() for name in not_met))
    return 1 if any(f.error for f in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
