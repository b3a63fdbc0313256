"""The table run_all.py prints: one ``Row`` per figure, with its limit measured in the same
run, the ratio, the goal and whether it was met; the rows of each benchmark; the printer."""

from dataclasses import dataclass

from run_all_figures import Figures

MEMORY_FLAT = 1.25


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
        Row("  paired: each verify against the Ed25519 rate around it (median)", "", "",
            fmt(v.get("paired_pct"), " %", 1), ">= 80 %",
            status(None if "paired_pct" not in v else v["paired_pct"] >= 80)),
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
        Row("guard_client's own part p50 (overhead - the verdict and record it seals)",
            fmt(v.get("guard_own_ms"), " ms", 2),
            f"verdict + record {fmt(v.get('guard_chain_ms'), ' ms', 2)}", "", "", ""),
    ]  # fmt: skip


def _against_pgbench(name: str, rate: float | None, tps: float | None) -> Row:
    """A rate of durable decisions beside ``pgbench -N`` on the same server; goal half of it."""
    ratio = rate / tps if rate and tps else None
    return Row(name, fmt(rate, " /s"), f"pgbench -c 8 -N {fmt(tps, ' tps')}",
               fmt(None if ratio is None else 100 * ratio, " %", 1), ">= 50 %",
               status(None if ratio is None else ratio >= 0.5))  # fmt: skip


def pg_rows(f: Figures) -> list[Row]:
    v = f.values
    return [
        _against_pgbench("PG store: verdicts/s, 8 processes", v.get("pg_rate"), v.get("pgbench_tps")),
        Row("  PG verdict in-process (warm) p50 / p99",
            f"{fmt(v.get('pg_p50_ms'), ' ms', 3)} / {fmt(v.get('pg_p99_ms'), ' ms', 3)}",
            "", "", "", ""),
        Row("  file store: verdicts/s, 8 processes", fmt(v.get("file_rate"), " /s"), "", "", "", ""),
    ]  # fmt: skip


def pg_fleet_rows(f: Figures) -> list[Row]:
    v = f.values
    return [
        _against_pgbench(
            "PG fleet, 4 gateway hosts: decisions/s", v.get("fleet_decisions"), v.get("fleet_tps")
        ),
        Row("  calls/s (verdict + record each); load average",
            f"{fmt(v.get('fleet_calls'), ' /s')}; {fmt(v.get('fleet_load'), '', 2)}", "", "", "", ""),
        Row("  decisions per commit", fmt(v.get("fleet_per_commit"), "", 2), "", "", "", ""),
        Row("  statements per decision; hosts waiting for the lock",
            f"{fmt(v.get('fleet_statements'), '', 2)}; {fmt(v.get('fleet_lock_waiters'), '', 2)}",
            "", "", "", ""),
        Row("  floor (4 bare pass-throughs): calls/s; fleet's share",
            f"{fmt(v.get('fleet_floor_calls'), ' /s')}; {fmt(v.get('fleet_floor_share'), ' %', 1)}",
            "", "", "", ""),
        Row("  CPU ms per call: gateways, server; all (floor's all)",
            f"{fmt(v.get('fleet_gateway_cpu'), '', 2)}, {fmt(v.get('fleet_server_cpu'), '', 2)}; "
            f"{fmt(v.get('fleet_cpu'), '', 2)} ({fmt(v.get('fleet_floor_cpu'), '', 2)})",
            "", "", "", ""),
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


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def gateway_rows(f: Figures) -> list[Row]:
    v = f.values
    added, pct, rss = v.get("added_p50"), v.get("runaway_pct"), v.get("rss_ratio")
    floor_added = v.get("floor_added")
    # The floor's own added time is tiny and noisy; below 0.1 ms the ratio says nothing.
    added_x = _ratio(added, max(floor_added, 0.1) if floor_added is not None else None)
    ttfb_x = _ratio(v.get("ttfb_proxied"), v.get("ttfb_floor"))
    share = _ratio(v.get("gateway_rate16"), v.get("floor_rate16"))
    one, many = v.get("per_fsync_1"), v.get("per_fsync")
    return [
        Row("gateway: non-streaming call p50 added (verdict + record, fsync'd)",
            fmt(added, " ms", 2), f"floor adds {fmt(floor_added, ' ms', 2)}",
            fmt(added_x, "x floor", 2), "<= 2x floor",
            status(None if added_x is None else added_x <= 2)),
        Row("  the same, absolute (goal on a quiet machine: see the load above)",
            fmt(added, " ms", 2), "", "", "<= 1.5 ms",
            status(None if added is None else added <= 1.5)),
        Row("  p50 / p99 through the gateway", fmt(v.get("proxied_p50"), " ms", 2),
            f"direct {fmt(v.get('direct_p50'), ' ms', 2)}",
            f"p99 {fmt(v.get('proxied_p99'), ' ms', 2)}", "", ""),
        Row("  time to the first streamed byte p50", fmt(v.get("ttfb_proxied"), " ms", 2),
            f"floor {fmt(v.get('ttfb_floor'), ' ms', 2)}", fmt(ttfb_x, "x", 2), "<= 1.5x",
            status(None if ttfb_x is None else ttfb_x <= 1.5)),
        Row("  16 concurrent clients: gated calls/s", fmt(v.get("gateway_rate16"), " /s"),
            f"floor {fmt(v.get('floor_rate16'), ' /s')}",
            fmt(None if share is None else 100 * share, " %", 0), ">= 50 %",
            status(None if share is None else share >= 0.5)),
        Row("  sealed entries per fsync, 1 client", fmt(one, "", 2), "", "", ">= 1",
            status(None if one is None else one >= 1)),
        Row("  64 concurrent clients: gated calls/s", fmt(v.get("concurrent_rate"), " /s"),
            f"{fmt(many, ' entries per fsync', 1)}", "", ">= 10 per fsync",
            status(None if many is None else many >= 10)),
        Row("  RSS after 10k calls vs 1k", fmt(rss, "x", 2),
            f"1k: {fmt(v.get('rss_small'), ' MiB', 1)}", "", f"<= {MEMORY_FLAT}x",
            status(None if rss is None else rss <= MEMORY_FLAT)),
        Row("  Bedrock stream (SigV4, event-stream frames): whole stream p50 added",
            fmt(v.get("bedrock_added"), " ms", 2),
            f"Anthropic stream {fmt(v.get('anthropic_keys_added'), ' ms', 2)} (both with keys)",
            "", "", ""),
        Row("  runaway loop: spend at the halt, 8 loops, $1 cap", fmt(pct, " %", 2), "cap 100 %",
            "", "90-100 %", status(None if pct is None else 90 <= pct <= 100)),
    ]  # fmt: skip


def budgets_rows(f: Figures) -> list[Row]:
    v = f.values
    none, ten, hundred = v.get("budgets_0_ms"), v.get("budgets_10_ms"), v.get("budgets_100_ms")
    ratio = ten / none if ten and none else None
    return [
        Row("verdict p50 with 10 budgets that all apply (warm, fsync'd)", fmt(ten, " ms", 2),
            f"no budgets {fmt(none, ' ms', 2)}", fmt(ratio, "x", 2), "<= 1.3x",
            status(None if ratio is None else ratio <= 1.3)),
        Row("verdict p50 with 100 budgets that all apply", fmt(hundred, " ms", 2),
            f"no budgets {fmt(none, ' ms', 2)}",
            fmt(hundred / none if hundred and none else None, "x", 2), "", ""),
    ]  # fmt: skip


def sessions_rows(f: Figures) -> list[Row]:
    v = f.values
    one, many, count = v.get("sessions_one_ms"), v.get("sessions_many_ms"), v.get("sessions_many")
    ratio = _ratio(many, one)
    shot_one, shot_many = v.get("oneshot_one_ms"), v.get("oneshot_many_ms")
    shot = _ratio(shot_many, shot_one)
    return [
        Row(f"verdict p50 at {fmt(count)} sessions of a per-session budget", fmt(many, " ms", 2),
            f"one session {fmt(one, ' ms', 2)}", fmt(ratio, "x", 2), "<= 1.2x",
            status(None if ratio is None else ratio <= 1.2)),
        Row(f"one-shot verdict p50 at {fmt(count)} sessions", fmt(shot_many, " ms", 2),
            f"one session {fmt(shot_one, ' ms', 2)}", fmt(shot, "x", 2), "<= 1.2x",
            status(None if shot is None else shot <= 1.2)),
    ]  # fmt: skip
