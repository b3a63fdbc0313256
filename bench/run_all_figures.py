"""How run_all.py reads the benchmarks' output: the parsed ``Figures`` of one script
and a parser per script that fills them from its printed report, naming whatever it
could not find."""

import re
from collections.abc import Callable
from dataclasses import dataclass, field

NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?)"


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


# --- parsing the scripts' output --------------------------------------------------------------


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
    f.grab("paired_pct", rf"paired ratio, median of \d+\s*:\s*{NUM}\s*%")
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
    f.grab("guard_chain_ms", rf"verdict \+ record, in-process p50\s+{NUM}\s*ms")
    f.grab("guard_own_ms", rf"guard's own part p50\s+{NUM}\s*ms")


def parse_pg(f: Figures) -> None:
    f.grab("pgbench_tps", rf"pgbench -c 8 -j 2 -T \d+ -N\s*:\s*{NUM} tps")
    f.grab("pg_rate", rf"pg store, 8 processes\s*:\s*{NUM} verdicts/s")
    f.grab("pg_p50_ms", rf"one verdict in-process\s*:\s*p50 {NUM} ms")
    f.grab("pg_p99_ms", rf"one verdict in-process\s*:\s*p50 [\d.]+ ms p99 {NUM} ms")
    f.grab("file_rate", rf"file store, 8 processes\s*:\s*{NUM} verdicts/s")


def parse_pg_fleet(f: Figures) -> None:
    f.grab("fleet_tps", rf"pgbench -c 8 -j 2 -T \d+ -N\s*:\s*{NUM} tps")
    f.grab("fleet_calls", rf"pg fleet, 4 gateway hosts\s*:\s*{NUM} calls/s")
    f.grab("fleet_decisions", rf"calls/s, {NUM} decisions/s")
    f.grab("fleet_load", rf"of pgbench\), load average {NUM}")
    f.grab("fleet_per_commit", rf"decisions per commit\s*:\s*{NUM}")
    f.grab("fleet_floor_calls", rf"bare pass-throughs\s*:\s*{NUM} calls/s")
    f.grab("fleet_floor_share", rf"share of the floor\s*:\s*{NUM} %")
    f.grab("fleet_statements", rf"statements per decision\s*:\s*{NUM}")
    f.grab("fleet_lock_waiters", rf"hosts waiting for lock\s*:\s*{NUM}")
    f.grab("fleet_floor_cpu", rf"floor\s*:.*; total {NUM}")
    f.grab("fleet_gateway_cpu", rf"pg fleet :\s*gateways {NUM}")
    f.grab("fleet_server_cpu", rf"pg fleet :.*server {NUM}")
    f.grab("fleet_cpu", rf"pg fleet :.*; total {NUM}")


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


def parse_gateway(f: Figures) -> None:
    f.grab("direct_p50", rf"non-streaming direct\s*:\s*p50 {NUM} ms")
    f.grab("direct_p99", rf"non-streaming direct\s*:\s*p50 [\d.]+ ms, p99 {NUM} ms")
    f.grab("proxied_p50", rf"non-streaming via gateway\s*:\s*p50 {NUM} ms")
    f.grab("proxied_p99", rf"non-streaming via gateway\s*:\s*p50 [\d.]+ ms, p99 {NUM} ms")
    f.grab("added_p50", rf"added by the gateway\s*:\s*p50 (-?{NUM}) ms")
    f.grab("ttfb_direct", rf"first streamed byte\s*:\s*direct p50 {NUM} ms")
    f.grab("ttfb_proxied", rf"first streamed byte\s*:.*via gateway p50 {NUM} ms")
    f.grab("concurrent_rate", rf"64 concurrent clients\s*:\s*{NUM} gated calls/s")
    f.grab("per_fsync", rf"gated calls/s, {NUM} sealed entries per fsync")
    f.grab("rss_small", rf"gateway RSS\s*:\s*{NUM} MiB")
    f.grab("rss_ratio", rf"gateway RSS\s*:.*\({NUM}x\)")
    f.grab("runaway_pct", rf"runaway loop\s*:.*= {NUM} % of the \$1 cap")
    f.grab("floor_p50", rf"non-streaming via floor\s*:\s*p50 {NUM} ms")
    f.grab("floor_added", rf"added by the gateway\s*:.*the floor adds (-?{NUM}) ms")
    f.grab("ttfb_floor", rf"first streamed byte\s*:.*via floor p50 {NUM} ms")
    f.grab("floor_rate16", rf"16 concurrent clients\s*:\s*floor {NUM} calls/s")
    f.grab("gateway_rate16", rf"16 concurrent clients\s*:.*gateway {NUM} gated calls/s")
    f.grab("per_fsync_1", rf"1 client\s*:\s*{NUM} sealed entries per fsync")
    f.grab("bedrock_added", rf"Bedrock stream \(SigV4\)\s*:.*?, adds (-?{NUM}) ms")
    f.grab("anthropic_keys_added", rf"Anthropic stream \(keys\)\s*:.*?, adds (-?{NUM}) ms")


def parse_budgets(f: Figures) -> None:
    for count in (0, 10, 100):
        f.grab(f"budgets_{count}_ms", rf"budgets\s+{count}: verdict p50\s+{NUM} ms")


def parse_sessions(f: Figures) -> None:
    f.grab("sessions_one_ms", rf"sessions 1: verdict p50\s+{NUM} ms")
    f.grab("sessions_many", r"sessions ([\d,]+): verdict p50[^\n]*x one session")
    f.grab("sessions_many_ms", rf"sessions [\d,]+: verdict p50\s+{NUM} ms[^\n]*x one session")
    f.grab("oneshot_one_ms", rf"one-shot[^\n]*sessions 1: verdict p50\s+{NUM} ms")
    f.grab("oneshot_many_ms", rf"one-shot[^\n]*sessions [\d,]+: verdict p50\s+{NUM} ms[^\n]*x one")


PARSERS: dict[str, Callable[[Figures], None]] = {
    "append": parse_append,
    "verify": parse_verify,
    "gate": parse_gate,
    "merkle": parse_merkle,
    "pg": parse_pg,
    "pgfleet": parse_pg_fleet,
    "calls": parse_calls,
    "server": parse_server,
    "gateway": parse_gateway,
    "budgets": parse_budgets,
    "sessions": parse_sessions,
}
