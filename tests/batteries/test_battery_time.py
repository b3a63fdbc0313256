"""Battery: time. Day boundaries with open reservations, TTLs to the second, a writer
whose clock runs behind the chain, and clocks at the ends of what ``datetime`` holds.

Areas (every time fixed with ``LEDGER_NOW``):

* **midnight**: verdicts admitted just before UTC midnight and recorded just after count
  on the reservation's day (SPEC §4 "Budget day of a settled record"); records settled
  before midnight stay there; a reservation that expires across midnight counts until
  midnight and never on the new day; a record after its reservation expired counts on the
  day it is recorded; a verdict on the new day never counts yesterday's reservations.
* **ttl**: token and USD reservations made at T are still held at T+ttl−1 s and released
  at T+ttl+1 s, for several ``usd.reservation_ttl_seconds``, also across midnight.
* **behind**: a writer whose ``LEDGER_NOW`` is 30 s to 10 min behind the chain head seals
  at the head's time, so its reservations and countdowns last their full span from that
  time; a verdict more than ``clock_tolerance_seconds`` behind halts ``clock_drift``.
* **extremes**: ``LEDGER_NOW`` at 0001-01-01, 9999-12-31T23:59:59.999999Z, with +14:00 /
  −12:00 offsets, just inside the range the chain works with, on an empty home and on one
  with a 2026 head; ``time start --end`` and ``LEDGER_BUDGET_END`` at the extremes.
* **property**: seeded sequences of verdicts and records around midnight against a $10 cap
  (and a $6 sub-cap for openai), every admitted verdict settled by its own record
  (≤ its estimate, within the TTL): the recorded spend of every day stays within the cap
  plus one call (reported: the largest overshoot, expected none at all).

Every command: never exit 70, no ``Traceback``, a documented exit; ``verdict`` always prints
a JSON decision; ``verify-chain`` OK at the end of every scenario (no half-written chain),
with timestamps that never go backwards.
"""

import datetime as dt
import json
import random
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.batteries.common import iso, sized, summary
from tests.conftest import Result, clean_env, run_process

SEED = 23_59_59
DOCUMENTED = frozenset({0, 1, 2, 65, 74, 75, 78})
SEQUENCES = sized(30, 300)
PROCESS_EXTREMES = sized(4, 12)
CAP = 10_000_000
OPENAI_CAP = 6_000_000
D0 = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
MIDNIGHT = D0 + dt.timedelta(days=1)  # 2026-06-02T00:00:00Z
DAY1, DAY2 = "2026-06-01", "2026-06-02"
BASE_ENV = {"LEDGER_BILLING_STALE_HALT_PCT": "100"}
ADMITTED = {"allow", "warn-90"}


def at(moment: dt.datetime, seconds: float = 0) -> str:
    return iso(moment + dt.timedelta(seconds=seconds))


@dataclass
class Tally:
    passed: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    commands: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    across: int = 0  # property records made after midnight that counted on the day before

    def add(self, area: str, ok: bool, detail: str) -> bool:
        if ok:
            self.passed[area] += 1
        else:
            self.failed[area] += 1
            self.failures.append(f"[{area}] {detail}")
        return ok


class Clocked:
    """Runs commands against one home at given times; judges every one by the contract."""

    def __init__(self, run: Any, tally: Tally, home: Path, area: str, **env: str) -> None:
        self.run_inproc = run
        self.tally = tally
        self.home = home
        self.area = area
        self.env = {**BASE_ENV, **env}

    def __call__(self, now: str, *args: str, process: bool = False, **env: str) -> Result:
        full_env = {**self.env, "LEDGER_NOW": now, **env}
        argv = ["--home", str(self.home), *args]
        if process:
            result = run_process(argv, env=clean_env(**full_env), timeout=120)
        else:
            try:
                result = self.run_inproc(argv, env=full_env)
            except BaseException as exc:  # an exception escaping main() is a traceback
                result = Result(70, "", f"Traceback (escaped main): {type(exc).__name__}: {exc}")
        self.tally.commands += 1
        problems = []
        if "Traceback" in result.stdout + result.stderr:
            problems.append("traceback")
        if result.code not in DOCUMENTED:
            problems.append(f"undocumented exit {result.code}")
        if args[0] == "verdict":
            body = parse(result)
            if result.code not in {0, 1} or body is None or "verdict" not in body:
                problems.append("verdict printed no JSON decision")
        self.tally.add(
            self.area, not problems,
            f"{args} at {now} {env}: {'; '.join(problems)} -> {result.code} "
            f"{result.stdout[:120]!r} {result.stderr[-200:]!r}",
        )  # fmt: skip
        return result

    def expect(self, ok: bool, what: str, result: Result | None = None) -> bool:
        detail = what
        if result is not None:
            detail += f" -> {result.code} {result.stdout[:240]!r} {result.stderr[-160:]!r}"
        return self.tally.add(self.area, ok, detail)

    def chain_ok(self, now: str) -> None:
        """verify-chain OK, every line an entry, timestamps never going backwards (a home
        whose every command was refused may have no chain at all: ``OK 0 entries``, exit 0)."""
        result = self(now, "verify-chain")
        if not (self.home / "events.jsonl").exists():
            empty = result.code == 0 and result.stdout == "OK 0 entries\n"
            self.expect(empty, "no chain file: verify-chain OK 0 entries", result)
            return
        self.expect(result.code == 0 and result.stdout.startswith("OK "), "verify-chain OK", result)
        stamps = [json.loads(line)["ts_utc"] for line in self.chain_lines()]
        self.expect(stamps == sorted(stamps), f"timestamps never go backwards: {stamps[-5:]}")

    def chain_lines(self) -> list[bytes]:
        path = self.home / "events.jsonl"
        return path.read_bytes().splitlines() if path.exists() else []

    def entries(self, event_type: str) -> list[dict[str, Any]]:
        found = [json.loads(line) for line in self.chain_lines()]
        return [entry for entry in found if entry["event_type"] == event_type]


def parse(result: Result) -> dict[str, Any] | None:
    try:
        value = json.loads(result.stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def body(result: Result) -> dict[str, Any]:
    return parse(result) or {}


def fresh(template: Path, home: Path) -> Path:
    if home.exists():
        shutil.rmtree(home)
    shutil.copytree(template, home)
    return home


# --- midnight ---------------------------------------------------------------------------

BEFORE = [0.000001, 0.1, 1, 59, 600, 899]  # seconds before midnight the verdict is admitted


def midnight_battery(run: Any, tally: Tally, template: Path, work: Path) -> None:
    for before in BEFORE:
        # recorded after midnight, while the reservation (TTL 900 s) is still live
        for after in sorted({a for a in (0.000001, 1.0, 898.5 - before) if 0 < a < 899 - before}):
            home = fresh(template, work / "midnight")
            c = Clocked(run, tally, home, "midnight")
            late = c(at(MIDNIGHT, -before), "verdict", "7", "--provider", "openai")
            c.expect(body(late).get("verdict") == "allow", f"7 of 10 admitted {before}s before midnight", late)  # fmt: skip
            early = c(at(MIDNIGHT, after / 2), "verdict", "7", "--provider", "openai")
            b = body(early)
            c.expect(
                b.get("verdict") == "allow" and b.get("usd_reserved_micros") == 0
                and b.get("utc_day") == DAY2,
                f"new day ({after / 2}s after midnight) never counts yesterday's reservation", early,
            )  # fmt: skip
            for ref_of, day in ((late, DAY1), (early, DAY2)):
                recorded = c(at(MIDNIGHT, after), "record", "6.5", "--provider", "openai",
                             "--verdict-ref", body(ref_of).get("verdict_ref", ""))  # fmt: skip
                rb = body(recorded)
                c.expect(
                    rb.get("utc_day") == day and rb.get("settled") is True,
                    f"record {after}s after midnight counts on its reservation's day {day}",
                    recorded,
                )
            usage = c(at(MIDNIGHT, after + 1), "usage")
            c.expect(body(usage).get("usd_used_micros") == 6_500_000, "new day holds only its own record", usage)  # fmt: skip
            over = c(at(MIDNIGHT, after + 2), "verdict", "3.5")
            c.expect(body(over).get("verdict") == "halt-100", "6.5 + 3.5 reaches the new day's cap", over)  # fmt: skip
            fits = c(at(MIDNIGHT, after + 3), "verdict", "3.49")
            c.expect(body(fits).get("verdict") in ADMITTED, "6.5 + 3.49 fits the new day", fits)
            c.chain_ok(at(MIDNIGHT, after + 4))

    # settled before midnight
    home = fresh(template, work / "midnight")
    c = Clocked(run, tally, home, "midnight")
    v = c(at(MIDNIGHT, -2), "verdict", "9", "--provider", "openai")
    r = c(at(MIDNIGHT, -0.000001), "record", "9", "--provider", "openai", "--verdict-ref", body(v).get("verdict_ref", ""))  # fmt: skip
    c.expect(body(r).get("utc_day") == DAY1 and body(r).get("settled") is True, "settled before midnight counts on day 1", r)  # fmt: skip
    u = c(at(MIDNIGHT), "usage")
    c.expect(body(u).get("usd_used_micros") == 0 and body(u).get("utc_day") == DAY2, "midnight exactly: a new day with nothing used", u)  # fmt: skip
    v2 = c(at(MIDNIGHT, 0.000001), "verdict", "9.99")
    c.expect(body(v2).get("verdict") in ADMITTED and body(v2).get("usd_used_micros") == 0, "new day admits 9.99", v2)  # fmt: skip
    c.chain_ok(at(MIDNIGHT, 1))

    # a reservation that expires across midnight (TTL 900: 23:55 -> 00:10)
    home = fresh(template, work / "midnight")
    c = Clocked(run, tally, home, "midnight")
    v = c(at(MIDNIGHT, -300), "verdict", "9")
    u = c(at(MIDNIGHT, -0.000001), "usage")
    c.expect(body(u).get("usd_reserved_micros") == 9_000_000, "open reservation counts until midnight", u)  # fmt: skip
    last = c(at(MIDNIGHT, -0.000001), "verdict", "1")
    c.expect(body(last).get("verdict") == "halt-100", "9 reserved + 1 reaches day 1's cap", last)
    u = c(at(MIDNIGHT), "usage")
    c.expect(body(u).get("usd_reserved_micros") == 0, "yesterday's live reservation is not today's", u)  # fmt: skip
    v2 = c(at(MIDNIGHT, 0.5), "verdict", "9.99")
    c.expect(body(v2).get("verdict") in ADMITTED and body(v2).get("usd_reserved_micros") == 0, "new day admits 9.99 beside yesterday's live reservation", v2)  # fmt: skip
    r = c(at(MIDNIGHT, 300), "record", "9", "--provider", "openai", "--verdict-ref", body(v).get("verdict_ref", ""))  # fmt: skip
    c.expect(body(r).get("utc_day") == DAY1 and body(r).get("settled") is True, "live reservation from day 1 settles on day 1", r)  # fmt: skip
    u = c(at(MIDNIGHT, 301), "usage")
    c.expect(body(u).get("usd_used_micros") == 0, "day 2 used stays 0 after a day-1 record", u)
    c.chain_ok(at(MIDNIGHT, 302))

    # a record after its reservation expired counts on the day it is recorded
    home = fresh(template, work / "midnight")
    c = Clocked(run, tally, home, "midnight")
    v = c(at(MIDNIGHT, -600), "verdict", "4", "--provider", "openai")  # expires 00:05
    r = c(at(MIDNIGHT, 301), "record", "4", "--provider", "openai", "--verdict-ref", body(v).get("verdict_ref", ""))  # fmt: skip
    c.expect(body(r).get("utc_day") == DAY2 and body(r).get("settled") is False, "expired reservation: counts on the record's day", r)  # fmt: skip
    c.expect("warning" in r.stderr, "expired reservation: a warning on stderr", r)
    c.chain_ok(at(MIDNIGHT, 302))

    # many reservations yesterday, none today
    home = fresh(template, work / "midnight")
    c = Clocked(run, tally, home, "midnight")
    for n in range(9):
        v = c(
            at(MIDNIGHT, -60 + n), "verdict", "1", "--provider", "anthropic" if n % 2 else "openai"
        )
        c.expect(body(v).get("verdict") in ADMITTED, f"reservation {n + 1} of 9 admitted", v)
    full = c(at(MIDNIGHT, -1), "verdict", "1")
    c.expect(body(full).get("verdict") == "halt-100", "a tenth $1 reaches day 1's cap", full)
    v = c(at(MIDNIGHT), "verdict", "9.5")
    b = body(v)
    c.expect(b.get("verdict") in ADMITTED and b.get("usd_reserved_micros") == 0,
             "new day at midnight exactly counts none of yesterday's reservations", v)  # fmt: skip
    u = c(at(MIDNIGHT, 30), "usage")
    c.expect(body(u).get("usd_reserved_micros") == 9_500_000, "new day holds only its own reservation", u)  # fmt: skip
    c.chain_ok(at(MIDNIGHT, 31))


# --- ttl --------------------------------------------------------------------------------


def ttl_battery(run: Any, tally: Tally, template: Path, work: Path) -> None:
    starts = [D0 + dt.timedelta(hours=12), MIDNIGHT - dt.timedelta(seconds=30)]
    for ttl in (60, 900, 3600):
        for start in starts:
            env = {"LEDGER_USD_RESERVATION_TTL_SECONDS": str(ttl)}
            home = fresh(template, work / "ttl")
            c = Clocked(run, tally, home, "ttl", **env)
            c(at(start), "tokens", "create", "cv", "--agent-max", "1000")
            check = c(at(start), "tokens", "check", "cv", "a1", "600")
            c.expect(body(check).get("reservation_expires_at") == at(start, ttl), f"token reservation at {at(start)} expires after {ttl}s", check)  # fmt: skip
            held = c(at(start, ttl - 1), "tokens", "check", "cv", "a1", "401")
            c.expect(held.code == 1 and body(held).get("reason") == "agent_budget_exceeded", f"held at T+{ttl}-1s", held)  # fmt: skip
            freed = c(at(start, ttl + 1), "tokens", "check", "cv", "a1", "401")
            c.expect(freed.code == 0 and body(freed).get("allowed") is True, f"released at T+{ttl}+1s", freed)  # fmt: skip
            c.chain_ok(at(start, ttl + 2))
            if start.time() == dt.time(12):  # USD: a day-bound reservation, same TTL
                home = fresh(template, work / "ttl")
                c = Clocked(run, tally, home, "ttl", **env)
                v = c(at(start), "verdict", "6")
                c.expect(body(v).get("verdict") in ADMITTED, "6 of 10 admitted", v)
                held = c(at(start, ttl - 1), "verdict", "5")
                c.expect(body(held).get("verdict") == "halt-100", f"USD reservation held at T+{ttl}-1s", held)  # fmt: skip
                freed = c(at(start, ttl + 1), "verdict", "5")
                c.expect(body(freed).get("verdict") in ADMITTED, f"USD reservation released at T+{ttl}+1s", freed)  # fmt: skip
                c.chain_ok(at(start, ttl + 2))


# --- a writer behind the head -----------------------------------------------------------


def behind_battery(run: Any, tally: Tally, template: Path, work: Path) -> None:
    head = D0 + dt.timedelta(hours=12)
    ttl = 900
    for lag in (30, 59, 120, 600):
        home = fresh(template, work / "behind")
        c = Clocked(run, tally, home, "behind")
        c(at(head), "tokens", "create", "cv", "--agent-max", "1000")
        c(at(head), "verdict", "0.01")
        check = c(at(head, -lag), "tokens", "check", "cv", "a1", "600")
        c.expect(body(check).get("reservation_expires_at") == at(head, ttl),
                 f"{lag}s behind: token reservation runs from the head's time", check)  # fmt: skip
        held = c(at(head, ttl - 1), "tokens", "check", "cv", "a1", "401")
        c.expect(held.code == 1, f"{lag}s behind: still held at head+ttl-1s", held)
        freed = c(at(head, ttl + 1), "tokens", "check", "cv", "a1", "401")
        c.expect(freed.code == 0, f"{lag}s behind: released at head+ttl+1s", freed)

        home = fresh(template, work / "behind")
        c = Clocked(run, tally, home, "behind")
        c(at(head), "verdict", "0.01")
        v = c(at(head, -lag), "verdict", "2")
        sealed = c.entries(f"budget.{body(v).get('verdict', '?').replace('-', '_')}")
        if lag <= 60:
            c.expect(
                body(v).get("verdict") == "allow", f"{lag}s behind (within tolerance): decides", v
            )
            reservation = sealed[-1]["payload"].get("reservation") if sealed else None
            c.expect(isinstance(reservation, dict) and reservation.get("expires_at") == at(head, ttl),
                     f"{lag}s behind: USD reservation runs from the head's time ({reservation})")  # fmt: skip
            u = c(at(head, ttl - 1), "usage")
            c.expect(body(u).get("usd_reserved_micros") == 2_010_000, f"{lag}s behind: reserved until head+ttl", u)  # fmt: skip
        else:
            c.expect(body(v).get("verdict") == "halt-uncertainty" and body(v).get("uncertainty_reason") == "clock_drift",
                     f"{lag}s behind (past tolerance): halts clock_drift", v)  # fmt: skip
        c.expect(bool(sealed) and sealed[-1]["ts_utc"] == at(head), f"{lag}s behind: verdict sealed at the head's time")  # fmt: skip
        r = c(at(head, -lag), "record", "1", "--provider", "openai")
        records = c.entries("budget.record_call")
        c.expect(bool(records) and records[-1]["ts_utc"] == at(head) and body(r).get("utc_day") == DAY1,
                 f"{lag}s behind: record sealed at the head's time", r)  # fmt: skip
        start = c(at(head, -lag), "time", "start", "--budget-seconds", "600")
        c.expect(body(start).get("deadline") == at(head, 600), f"{lag}s behind: countdown from the head's time", start)  # fmt: skip
        status = c(at(head, 599), "time", "status")
        c.expect(body(status).get("remaining_seconds") == 1, f"{lag}s behind: 1 s left at head+599s", status)  # fmt: skip
        c.chain_ok(at(head, 600))


# --- clocks at the extremes -------------------------------------------------------------

EXTREME_NOW = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00.000000Z",
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00-12:00",
    "0001-01-02T23:59:59.999999Z",
    "0001-01-03T00:00:00Z",
    "0001-01-03T00:00:00+14:00",
    "9999-12-29T23:59:59.999999Z",
    "9999-12-30T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999+14:00",
    "9999-12-31T23:59:59.999999-12:00",
    "9999-12-31T12:00:00-12:00",
    "2026-06-01T00:00:00+14:00",
    "2026-06-01T23:59:59.999999-12:00",
    "1970-01-01T00:00:00Z",
    "2038-01-19T03:14:08Z",
]
EXTREME_END = [
    "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999-12:00", "9999-12-31T23:59:59.999999+14:00", "1970-01-01T00:00:00Z",
]  # fmt: skip
EXTREME_BUDGET_END = ["0", "-62135596800", "-62135596801", "253402300799", "253402300800",
                      "99999999999999999999", "1e20", "-1"]  # fmt: skip


def extreme_commands(now: str) -> list[list[str]]:
    return [
        ["verdict", "1"],
        ["verdict", "1", "--provider", "openai"],
        ["record", "1", "--provider", "openai"],
        ["usage"],
        ["tokens", "check", "cv", "a1", "10"],
        ["time", "start", "--end", now],
        ["time", "start", "--budget-seconds", "600"],
        ["time", "status"],
        ["status", "--json"],
    ]


def extremes_battery(run: Any, tally: Tally, template: Path, empty: Path, work: Path) -> None:
    rng = random.Random(SEED)
    processes = set(rng.sample(range(len(EXTREME_NOW) * 2), PROCESS_EXTREMES))
    number = 0
    for start in (empty, template):
        for now in EXTREME_NOW:
            home = fresh(start, work / "extreme")
            c = Clocked(run, tally, home, "extremes")
            if start is empty:
                c(now, "tokens", "create", "cv")
            for args in extreme_commands(now):
                c(now, *args, process=number in processes and args[0] == "verdict")
            c.chain_ok("2026-06-03T00:00:00Z" if start is template else now)
            number += 1
    home = fresh(template, work / "extreme")
    c = Clocked(run, tally, home, "extremes")
    for end in EXTREME_END:
        started = c("2026-06-01T12:00:00Z", "time", "start", "--end", end)
        c.expect(started.code in {0, 2}, f"time start --end {end}: started or refused", started)
        c("2026-06-01T12:00:01Z", "time", "status")
    for unix in EXTREME_BUDGET_END:
        status = c("2026-06-01T12:00:02Z", "time", "status", LEDGER_BUDGET_END=unix)
        c.expect(status.code in {0, 2, 78}, f"LEDGER_BUDGET_END={unix}: status or a config error", status)  # fmt: skip
        c("2026-06-01T12:00:02Z", "verdict", "1", LEDGER_BUDGET_END=unix)
    c.chain_ok("2026-06-01T12:00:03Z")


# --- the property -----------------------------------------------------------------------


@dataclass
class Pending:
    ref: str
    estimate: int
    provider: str | None
    due: dt.datetime
    expires: dt.datetime


def micros_text(micros: int) -> str:
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def one_sequence(run: Any, tally: Tally, template: Path, home: Path, rng: random.Random) -> int:
    """Verdicts and records around midnight; returns the largest overshoot of any cap.

    Every admitted verdict is recorded (at most its estimate) while its reservation is
    live: a record falls due at a random time within the TTL, and one about to expire
    before the next step is recorded first.
    """
    fresh(template, home)
    ttl = rng.choice([60, 300, 900])
    c = Clocked(
        run, tally, home, "property",
        LEDGER_USD_PROVIDER_CAPS=json.dumps({"openai": OPENAI_CAP / 1_000_000}),
        LEDGER_USD_RESERVATION_TTL_SECONDS=str(ttl),
    )  # fmt: skip
    dense = rng.random() < 0.4
    now = MIDNIGHT - dt.timedelta(seconds=rng.uniform(1, 5) if dense else rng.uniform(60, 900))
    pending: list[Pending] = []
    largest_call = 0

    def settle(p: Pending) -> None:
        nonlocal now
        now += dt.timedelta(microseconds=1)
        pending.remove(p)
        amount = rng.randint(0, p.estimate)
        r = c(iso(now), "record", micros_text(amount), "--provider", p.provider or "anthropic",
              "--verdict-ref", p.ref)  # fmt: skip
        c.expect(body(r).get("settled") is True, f"every record settles its own live verdict ({iso(now)} < {iso(p.expires)})", r)  # fmt: skip
        tally.across += body(r).get("utc_day") == DAY1 and now >= MIDNIGHT

    for _ in range(rng.randint(20, 45)):
        step = dt.timedelta(
            microseconds=rng.randint(1, 400_000) if dense else rng.randint(1, 90_000_000)
        )
        for p in sorted(pending, key=lambda p: p.expires):
            if p.expires - dt.timedelta(seconds=1) <= now + step:
                settle(p)
        now += step
        due = [p for p in pending if p.due <= now]
        if due and rng.random() < 0.7:
            settle(rng.choice(due))
            continue
        estimate = rng.choice([rng.randint(10_000, 500_000), rng.randint(500_000, 3_000_000)])
        provider = rng.choice(["openai", "anthropic", None])
        args = ["verdict", micros_text(estimate)]
        if provider:
            args += ["--provider", provider]
        v = c(iso(now), *args)
        tally.outcomes[str(body(v).get("verdict"))] += 1
        if body(v).get("verdict") in ADMITTED:
            largest_call = max(largest_call, estimate)
            expires = now + dt.timedelta(seconds=ttl)
            due_at = now + dt.timedelta(seconds=rng.uniform(0, ttl - 2))
            pending.append(Pending(body(v)["verdict_ref"], estimate, provider, due_at, expires))
    for p in sorted(pending, key=lambda p: p.due):  # settle what is left, each while live
        settle(p)
    c.chain_ok(iso(now + dt.timedelta(seconds=1)))
    spent: dict[str, int] = defaultdict(int)
    spent_openai: dict[str, int] = defaultdict(int)
    for entry in c.entries("budget.record_call"):
        payload = entry["payload"]
        spent[payload["utc_day"]] += payload["actual_micros"]
        if payload["provider"] == "openai":
            spent_openai[payload["utc_day"]] += payload["actual_micros"]
    overshoot = max(
        [0]
        + [total - CAP for total in spent.values()]
        + [total - OPENAI_CAP for total in spent_openai.values()]
    )
    c.expect(
        overshoot <= largest_call,
        f"recorded spend per day within the cap plus one call: {dict(spent)}, "
        f"openai {dict(spent_openai)}, largest call {largest_call}",
    )
    return overshoot


# --- the battery ------------------------------------------------------------------------


@pytest.mark.timeout(sized(600, 3600))
def test_time_battery(run_inproc, tmp_path, capsys):
    tally = Tally()
    template = tmp_path / "template"
    assert run_inproc(["--home", str(template), "init", "--daily-cap-usd", "10"]).code == 0
    empty = tmp_path / "empty"
    assert run_inproc(["--home", str(empty), "init", "--daily-cap-usd", "10"]).code == 0
    work = tmp_path / "work"
    work.mkdir()
    with_convoy = tmp_path / "with-convoy"
    shutil.copytree(template, with_convoy)
    c = Clocked(run_inproc, tally, with_convoy, "extremes")
    c("2026-06-01T12:00:00Z", "tokens", "create", "cv")
    c("2026-06-01T12:00:00Z", "verdict", "1")

    midnight_battery(run_inproc, tally, template, work)
    ttl_battery(run_inproc, tally, template, work)
    behind_battery(run_inproc, tally, template, work)
    extremes_battery(run_inproc, tally, with_convoy, empty, work)
    rng = random.Random(SEED)
    overshoots = [
        one_sequence(run_inproc, tally, template, work / "property", rng) for _ in range(SEQUENCES)
    ]

    passed, failed = sum(tally.passed.values()), sum(tally.failed.values())
    areas = sorted(set(tally.passed) | set(tally.failed))
    figures = ", ".join(f"{a} {tally.passed[a]}/{tally.passed[a] + tally.failed[a]}" for a in areas)
    summary(
        capsys, "time", passed, failed,
        f"{figures}; {tally.commands} commands; {SEQUENCES} midnight sequences: verdicts "
        f"{dict(sorted(tally.outcomes.items()))}, {tally.across} records after midnight on "
        f"the day before, largest overshoot of a day's cap ${max(overshoots) / 1_000_000:.6f}",
    )  # fmt: skip
    assert not tally.failures, "\n".join(tally.failures[:40])
