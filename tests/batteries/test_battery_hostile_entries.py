"""Battery: hostile entries. Entries signed with the home's own key whose payloads are
wrong in every way we can think of, and every command run after them.

A writer bug or a stolen key can seal anything the chain format holds. For every event
type this product writes (one per ``schemas/*.schema.json``) and a few it does not
(``budget.spend``, ``tokens.usage``, ``ledger.other`` in our namespaces, ``othertool.event``
in another tool's), a valid base payload is mutated: each field removed, its type changed
(string, number, null, list, object, bool), negative, zero, 2^53, 2^53+1, 5000000.5, a
100 kB string, junk nested 20 levels deep, a ``utc_day`` that is not the entry's day,
impossible dates and times (``2026-13-45``, ``2026-06-01T25:61:61.000000Z``) in the time
fields, an extra field, an empty payload, a payload that is not an object. Each entry is
appended (``common.forge_entry``) to a copy of one small home ($10 cap, some spend, an open
reservation, a convoy ``cv`` with use, a turns workflow, a tools budget, a countdown), then
the per-call and operator commands run against it.

For every (entry x command): never exit 70, never ``Traceback`` or ``internal error``, an
exit in {0, 1, 2, 65, 74, 75, 78}, and ``verdict`` always prints a JSON decision. Whenever
the entry cannot be folded — in our namespaces with a payload that breaks its schema
(checked here with ``jsonschema``), a time or day that is no real date, a spend day that is
not the entry's, a negative or fractional amount, an integer the chain cannot hold (beyond
±(2^53−1), SPEC §3), or an event type we do not know — or ``verify-chain`` reports the chain
BROKEN, the gate must not admit anything: no ``allow``/``warn-90`` from ``verdict``, no
``"allowed": true`` from ``tokens check`` or ``tools use`` (SPEC §4 row 1, §5). Controls:
each base payload as it is, and every entry of the other namespace, leave the gate deciding
normally. Other valid-but-unusual entries (zero amounts, deep junk in the free-form
``reading`` object) may fold or halt.

Each base payload is also appended unsigned after the trust store's ``strict_after``
(which ``ledger init`` sets to its own time), and loa's forced reconcile to a $0 bill with
it: ``verify-chain`` must report it BROKEN and the gate must not admit anything.

By default each (event type x mutation kind) is tried once, on a field picked with a fixed
seed (plus one or two of the fields the gate reads inside ``reading``), and besides
``verdict 1``, ``tokens check`` and ``tools use`` one more command is sampled per entry;
``LEDGER_BATTERY_LONG=1`` runs every field and every command. Whether the chain verifies is
decided in-process by the chain verifier, and every sampled ``verify-chain`` must agree
with it. A few verdicts run as real processes.

Defects this battery found (it fails while they are present):

1. **A ``reading`` the fold does not check.** ``budget.reconcile`` carries the billing
   reading it took in ``reading``, an object no schema describes, and the fold takes its
   ``billing_ts``, ``server_ts`` and ``usd_used_micros`` as they come. A signed reconcile
   whose ``reading`` has ``"billing_ts": null`` (or a number, a bool, a list, an object),
   or ``"usd_used_micros"`` that is a list, an object, a string or ``5000000.5``, verifies
   (``verify-chain``: ``OK``), and from then on ``verdict`` (with and without
   ``--provider``), ``usage``, ``status`` and ``reconcile`` exit 70 with
   ``ledger: internal error: ValueError: timestamp not in YYYY-MM-DDTHH:MM:SS.ffffffZ form:
   None`` (or ``TypeError: '>' not supported between instances of 'list' and 'int'``,
   ``TypeError: both arguments should be Rational instances``) and ``verdict`` prints no
   decision at all; a ``server_ts`` of ``0``, ``false`` or ``""`` is taken as absent and the
   verdict allows. Repro: ``ledger init --daily-cap-usd 10``, then sign and append (with the
   home's key, ``common.forge_entry``) a ``budget.reconcile`` at 12:01 whose ``reading`` is
   ``{"provider": "aggregate", "ok": true, "usd_used_micros": 0, "billing_ts": null,
   "server_ts": null, "fetched_at": "2026-06-01T12:01:00.000000Z", "reason": null}`` (the
   other fields as the product writes them); ``LEDGER_NOW=2026-06-01T12:02:00Z ledger
   verdict 1`` → exit 70, empty stdout. Expected: ``halt-uncertainty`` /
   ``counter_inconsistent`` naming the line (SPEC §5), exit 1.
2. **Integers beyond 2^53−1.** An entry holding one (``"budget": 9007199254740993`` in a
   ``tools.use``), signed over the layout the product writes (sorted keys, no spaces),
   verifies — while RFC 8785 cannot represent it (``rfc8785`` refuses it; read as a JSON
   number it is 9007199254740992, so those are not the entry's canonical bytes), and the
   very same entry and signature in any other layout is ``BROKEN line N: malformed entry:
   cannot canonicalize``. The gate then folds it as if it were valid: ``verdict 1`` allows
   (exit 0), ``tokens check`` and ``tools use`` allow. Expected: ``verify-chain`` BROKEN at
   that line whatever its layout, or at least the gate halting ``counter_inconsistent``
   (SPEC §3: an integer over 2^53−1 is something the chain cannot hold).
"""

import datetime as dt
import json
import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.batteries.common import LONG, forge_entry, iso, sized, summary
from tests.conftest import REPO, Result, clean_env, run_process

SEED = 2_6_13_45
DOCUMENTED = frozenset({0, 1, 2, 65, 74, 75, 78})
EXTRA_COMMANDS = sized(1, 99)
PROCESS_CASES = sized(4, 30)

T0 = dt.datetime(2026, 6, 1, 12, 0, 0, tzinfo=dt.UTC)
HOSTILE_AT = T0 + dt.timedelta(seconds=60)
COMMANDS_AT = T0 + dt.timedelta(seconds=120)
DAY = "2026-06-01"
T = iso(HOSTILE_AT)
LATER = iso(HOSTILE_AT + dt.timedelta(minutes=15))
HOUR = iso(HOSTILE_AT + dt.timedelta(hours=1))
HASH = "0" * 64

OUR_NAMESPACES = frozenset(
    {"budget", "tokens", "turns", "tools", "time", "hook", "ledger", "chain", "gateway", "config"}
)
TIME_FIELDS = frozenset(
    {"expires_at", "fetched_at", "billing_ts", "server_ts", "deadline", "local_time"}
)
SAFE_INT = 2**53 - 1
READING_FIELDS = frozenset(
    {"reading.usd_used_micros", "reading.billing_ts", "reading.server_ts", "reading.fetched_at"}
)
HOOK_DIR = REPO / "tests" / "fixtures" / "hooks"


def _verdict_payload(verdict: str, reservation: Any, reason: Any = None) -> dict[str, Any]:
    return {
        "verdict": verdict, "provider": "openai", "cycle_id": None, "agent": None,
        "utc_day": DAY, "estimated_micros": 100_000, "usd_used_micros": 500_000,
        "usd_reserved_micros": 250_000, "cap_micros": 10_000_000, "deciding_cap": "aggregate",
        "usage_pct": "8.5000", "uncertainty_reason": reason,
        "diagnostic": None if reason is None else "forged", "local_time": T,
        "reservation": reservation,
    }  # fmt: skip


def _reading() -> dict[str, Any]:
    return {
        "provider": "aggregate", "ok": True, "usd_used_micros": 500_000, "billing_ts": T,
        "server_ts": None, "fetched_at": T, "reason": None,
    }  # fmt: skip


UNKNOWN_BASE = {"provider": "openai", "amount_micros": 100_000, "utc_day": DAY, "at": T}

BASES: dict[str, dict[str, Any]] = {
    "budget.allow": _verdict_payload("allow", {"micros": 100_000, "expires_at": LATER}),
    "budget.warn_90": _verdict_payload("warn-90", {"micros": 100_000, "expires_at": LATER}),
    "budget.halt_100": _verdict_payload("halt-100", None),
    "budget.halt_uncertainty": _verdict_payload("halt-uncertainty", None, "billing_stale"),
    "budget.observation": {**_reading(), "source": "poll"},
    "budget.reconcile": {
        "provider": "aggregate", "utc_day": DAY, "counter_micros": 500_000,
        "billing_micros": 500_000, "drift_pct": "0.0000", "threshold_pct": "5.0000",
        "blocking": False, "billing_api_unreachable": False, "forced": False,
        "force_reason": None, "reason": None, "reading": _reading(),
    },
    "budget.record_call": {
        "provider": "openai", "actual_micros": 100_000, "utc_day": DAY, "verdict_ref": None,
        "settled": False, "model_id": None, "cycle_id": None, "input_tokens": 10,
        "output_tokens": 20, "idempotency_key": None,
    },
    "hook.pre_tool_use": {
        "session_id": "s-1", "tool_name": "Bash", "workflow": "wf", "turn_counted": True,
        "agent": "scout", "tool_call": "counted", "budget": 10, "budget_used": 2,
        "decision": "allow", "reason": None,
    },
    "chain.finding": {"line": 2, "reason": "signature does not verify"},
    "gateway.key_issued": {
        "name": "ci", "sha256_prefix": "0123456789abcdef", "agent": "ci-bot",
        "tags": ["team:infra"], "expires": None,
    },
    "gateway.key_revoked": {
        "name": "ci", "sha256_prefix": "0123456789abcdef", "agent": None, "tags": [],
        "expires": "2099-01-01T00:00:00.000000Z",
    },
    "config.changed": {
        "before": None,
        "after": {"usd": {"daily_cap": "50", "warn_pct": "90"}, "budgets": []},
        "scope": "host", "user": "ops", "host": "gw-1",
    },
    "ledger.key_rotated": {
        "old_key_id": "aaaaaaaaaaaaaaaa", "new_key_id": "bbbbbbbbbbbbbbbb",
        "new_public_key": "A" * 43 + "=",
    },
    "ledger.recovered": {
        "damage": "forged", "damaged_lines": 3, "restored_entries": 3, "snapshot_entries": 0,
        "lost_lines": 0, "first_lost_line": None, "reason": None, "snapshot": None,
        "evidence": None, "head_hash": None, "checkpoint_entries": None,
        "checkpoints_retired": [],
    },
    "ledger.snapshot": {
        "path": "snapshots/snapshot-20260601T120100000000Z-000000000010.manifest.json",
        "sha256": HASH, "entries": 10, "head_hash": HASH, "chain_id": HASH,
        "chain_sha256": HASH, "pruned": [],
    },
    "ledger.state_rebuilt": {"entries": 10, "head_hash": HASH, "previous_state": "matching"},
    "ledger.prices_synced": {"source": "genai-prices 0.0.1", "taken_at": T, "providers": 2,
                             "models": 10, "sha256": HASH},
    "time.started": {"deadline": HOUR, "budget_seconds": 3600, "source": "budget_seconds"},
    "tokens.budget_created": {
        "convoy": "cv", "convoy_max_tokens": 500_000, "agent_max_tokens": 1000, "warn_pct": "80",
    },
    "tokens.budget_deleted": {"convoy": "cv"},
    "tokens.check": {
        "convoy": "cv", "agent": "a1", "projected_tokens": 10, "allowed": True, "reason": "ok",
        "remaining_tokens": 900, "usage_pct": "0.0200", "agent_usage_pct": "10.0000",
        "convoy_max_tokens": 500_000, "agent_max_tokens": 1000, "convoy_used_tokens": 90,
        "convoy_reserved_tokens": 0, "agent_used_tokens": 90, "agent_reserved_tokens": 0,
        "diagnostic": None, "local_time": T, "reservation": {"tokens": 10, "expires_at": LATER},
    },
    "tokens.record": {
        "convoy": "cv", "agent": "a1", "input_tokens": 1, "output_tokens": 1, "check_ref": None,
        "settled_ref": None, "known_convoy": True, "idempotency_key": None,
    },
    "tools.budget_created": {
        "agent": "scout", "role": "observer", "budget": 10, "files": None,
        "prior_failures": None, "framework_confidence": None, "replaced": True,
    },
    "tools.check": {"agent": "scout", "allowed": True, "budget": 10, "budget_used": 1,
                    "reason": None},
    "tools.use": {"agent": "scout", "exempt": False, "outcome": "counted", "budget": 10,
                  "budget_used": 1, "reason": None},
    "turns.budget_created": {"workflow": "wf", "total": 10, "phase": 5,
                             "phase_name": "initial", "replaced": True},
    "turns.check": {
        "workflow": "wf", "verdict": "ok", "effective_total": 1, "total": 10, "total_pct": 10,
        "effective_phase": 1, "phase": 5, "phase_pct": 20, "diagnostic": None,
    },
    "turns.phase_started": {"workflow": "wf", "phase_name": "p2", "phase": 5,
                            "previous_phase_name": "initial", "previous_phase_turns": 1},
    "turns.turn": {"workflow": "wf", "type": "tool_use", "budget_applies": True},
    "budget.spend": UNKNOWN_BASE,
    "tokens.usage": UNKNOWN_BASE,
    "ledger.other": UNKNOWN_BASE,
    "othertool.event": UNKNOWN_BASE,
}  # fmt: skip


def nested(depth: int) -> Any:
    value: Any = ["junk", 1, None]
    for level in range(depth):
        value = {f"k{level}": value, "n": level}
    return value


TYPE_VALUES: dict[str, Any] = {
    "type-string": "x",
    "type-number": 7,
    "type-null": None,
    "type-list": [1, "a"],
    "type-object": {"a": 1},
    "type-bool": True,
}
NUMBER_VALUES: dict[str, Any] = {
    "negative": -1,
    "zero": 0,
    "2^53": 2**53,
    "2^53+1": 2**53 + 1,
    "float": 5_000_000.5,
}
BIG_VALUES: dict[str, Any] = {"huge-string": "x" * 100_000, "nested-20": nested(20)}
DAY_VALUES = {"day-next": "2026-06-02", "day-past": "2026-05-29", "bad-date": "2026-13-45"}
TIME_VALUES = {
    "bad-date": "2026-13-45T00:00:00.000000Z",
    "bad-time": "2026-06-01T25:61:61.000000Z",
}


# --- payload surgery ------------------------------------------------------------------


def leaf_paths(payload: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field's path, nested objects' fields included."""
    paths = []
    for key, value in payload.items():
        paths.append((*prefix, key))
        if isinstance(value, dict):
            paths.extend(leaf_paths(value, (*prefix, key)))
    return paths


def _same_type(a: Any, b: Any) -> bool:
    def kind(v: Any) -> str:
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int | float):
            return "number"
        return type(v).__name__

    return kind(a) == kind(b)


def with_value(payload: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(payload))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy


def without(payload: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(payload))
    target = copy
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return copy


def get(payload: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = payload
    for key in path:
        value = value[key]
    return value


@dataclass
class Hostile:
    """One hostile entry: its event type, mutation kind, field and payload."""

    event_type: str
    kind: str
    where: str
    payload: Any
    signed: bool = True  # False: appended with no signature, after the trust store's strict_after

    @property
    def label(self) -> str:
        return f"{self.event_type}:{self.kind}:{self.where}"


def mutations(event_type: str, base: dict[str, Any]) -> dict[str, list[Hostile]]:
    """Every mutation of ``base``, grouped by kind."""
    kinds: dict[str, list[Hostile]] = {}

    def add(kind: str, where: str, payload: Any) -> None:
        kinds.setdefault(kind, []).append(Hostile(event_type, kind, where, payload))

    add("as-is", "-", base)
    add("empty-payload", "-", {})
    add("payload-list", "-", [base])
    add("extra-field", "zz_extra", {**base, "zz_extra": 1})
    for path in leaf_paths(base):
        where = ".".join(path)
        original = get(base, path)
        add("missing", where, without(base, path))
        for kind, value in TYPE_VALUES.items():
            if not _same_type(original, value):
                add(kind, where, with_value(base, path, value))
        for kind, value in {**NUMBER_VALUES, **BIG_VALUES}.items():
            add(kind, where, with_value(base, path, value))
        if path[-1] == "utc_day":
            for kind, value in DAY_VALUES.items():
                add(kind, where, with_value(base, path, value))
        if path[-1] in TIME_FIELDS:
            for kind, value in TIME_VALUES.items():
                add(kind, where, with_value(base, path, value))
    return kinds


# --- the oracle -------------------------------------------------------------------------


def schemas() -> dict[str, dict[str, Any]]:
    return {
        path.name.removesuffix(".schema.json"): json.loads(path.read_text())
        for path in sorted((REPO / "schemas").glob("*.schema.json"))
    }


def _real_time(text: str) -> bool:
    import re

    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z", text):
        return False
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _value_problem(value: Any) -> str | None:
    """Anywhere in the payload: a time or day field holding anything but a real time or day
    (or null), an amount (``*_micros``, ``*_tokens``) that is not a whole non-negative
    number (or null), an integer the chain cannot hold."""
    stack: list[tuple[str, Any]] = [("$", value)]
    while stack:
        key, item = stack.pop()
        if key in TIME_FIELDS and item is not None:
            if not (isinstance(item, str) and _real_time(item)):
                return f"{key}: not a time"
        elif key == "utc_day" and item is not None:
            try:
                dt.date.fromisoformat(item)
            except (TypeError, ValueError):
                return f"{key}: not a day"
        elif key.endswith(("_micros", "_tokens")) and item is not None:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                return f"{key}: amount {str(item)[:20]} is not a whole non-negative number"
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > SAFE_INT:
            return f"{key}: integer beyond 2^53-1"
        if isinstance(item, dict):
            stack.extend(item.items())
        elif isinstance(item, list):
            stack.extend((f"{key}[]", inner) for inner in item)
    return None


def judge(event_type: str, payload: Any, known: dict[str, dict[str, Any]]) -> str:
    """``foreign``, ``invalid: <why>`` or ``valid``."""
    from jsonschema import Draft202012Validator

    if event_type.split(".", 1)[0] not in OUR_NAMESPACES:
        return "foreign"
    if event_type not in known:
        return "invalid: unknown event type in our namespaces"
    if not isinstance(payload, dict):
        return "invalid: payload is not an object"
    error = next(iter(Draft202012Validator(known[event_type]).iter_errors(payload)), None)
    if error is not None:
        return f"invalid: schema: {error.message[:80]}"
    problem = _value_problem(payload)
    if problem is not None:
        return f"invalid: {problem}"
    if event_type == "budget.record_call" and payload["utc_day"] != DAY:
        return "invalid: spend day is not the entry's day"
    return "valid"


# --- running the commands ---------------------------------------------------------------

HOOK_PRE = (HOOK_DIR / "pre_tool_use_bash.json").read_text()
HOOK_POST = (HOOK_DIR / "post_tool_use_bash.json").read_text()
ALWAYS = ["verdict", "tokens-check", "tools-use"]
COMMANDS: dict[str, tuple[list[str], str]] = {
    "verify-chain": (["verify-chain"], ""),
    "verdict": (["verdict", "1"], ""),
    "verdict-openai": (["verdict", "1", "--provider", "openai"], ""),
    "record": (["record", "1", "--provider", "openai"], ""),
    "usage": (["usage"], ""),
    "status": (["status", "--json"], ""),
    "tokens-check": (["tokens", "check", "cv", "a1", "10"], ""),
    "tokens-record": (["tokens", "record", "cv", "a1", "1", "1"], ""),
    "tools-check": (["tools", "check", "scout"], ""),
    "tools-use": (["tools", "use", "scout"], ""),
    "turns-check": (["turns", "check", "wf"], ""),
    "turns-record": (["turns", "record", "wf"], ""),
    "time-status": (["time", "status"], ""),
    "hook-pre": (["hook", "pre-tool-use"], HOOK_PRE),
    "hook-post": (["hook", "post-tool-use"], HOOK_POST),
    "rebuild-state": (["rebuild-state"], ""),
    "checkpoint": (["checkpoint"], ""),
    "snapshot": (["snapshot"], ""),
    "reconcile": (["reconcile"], ""),
}
ENV = {"LEDGER_NOW": iso(COMMANDS_AT), "LEDGER_AGENT": "scout", "LEDGER_WORKFLOW": "wf"}


def build_base(run: Any, home: Path) -> None:
    """$10 cap with spend and an open reservation, a convoy with use, turns, tools, time."""

    def cli(*args: str) -> Any:
        result = run(["--home", str(home), *args], env={"LEDGER_NOW": iso(T0)})
        assert result.code == 0, (args, result)
        return json.loads(result.stdout) if result.stdout.strip() else None

    cli("init", "--daily-cap-usd", "10")
    ref = cli("verdict", "1", "--provider", "openai")["verdict_ref"]
    cli("record", "0.5", "--provider", "openai", "--verdict-ref", ref)
    cli("verdict", "0.25", "--provider", "anthropic")  # left open: a live reservation
    cli("tokens", "create", "cv", "--agent-max", "1000")
    check = cli("tokens", "check", "cv", "a1", "100")["check_ref"]
    cli("tokens", "record", "cv", "a1", "40", "50", "--check-ref", check)
    cli("turns", "create", "wf", "--total", "10", "--phase", "5")
    cli("turns", "record", "wf")
    cli("tools", "create", "scout", "--role", "observer")
    cli("tools", "use", "scout")
    cli("time", "start", "--budget-seconds", "3600")


@dataclass
class Tally:
    cases: int = 0
    failed_cases: int = 0
    failures: list[str] = field(default_factory=list)
    entries: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    broken: int = 0
    processes: int = 0
    kinds: dict[str, list[str]] = field(default_factory=dict)

    def fail(self, hostile: Hostile, name: str, result: Result, why: str) -> None:
        self.failures.append(
            f"{hostile.label} | {name}: {why} -> exit {result.code}, "
            f"stdout {result.stdout[:160]!r}, stderr {result.stderr[-200:]!r}"
        )
        self.kinds.setdefault(f"{hostile.event_type}:{hostile.kind} | {why}", []).append(
            self.failures[-1]
        )

    def report(self) -> str:
        """One example of each (event type, mutation, problem), with its count."""
        return "\n".join(
            f"{len(found)} x {found[0]}" for found in sorted(self.kinds.values(), key=len)[::-1]
        )


def document(result: Result) -> dict[str, Any] | None:
    try:
        value = json.loads(result.stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def judge_command(
    tally: Tally,
    hostile: Hostile,
    name: str,
    result: Result,
    must_refuse: bool,
    control: bool,
    foreign: bool,
) -> None:
    tally.cases += 1
    before = len(tally.failures)
    try:
        judge_result(tally, hostile, name, result, must_refuse, control, foreign)
    finally:
        tally.failed_cases += len(tally.failures) > before


def judge_result(
    tally: Tally,
    hostile: Hostile,
    name: str,
    result: Result,
    must_refuse: bool,
    control: bool,
    foreign: bool,
) -> None:
    if "Traceback" in result.stdout + result.stderr:
        tally.fail(hostile, name, result, "traceback")
    if "internal error" in result.stderr.lower():
        tally.fail(hostile, name, result, "internal error")
    if result.code not in DOCUMENTED:
        tally.fail(hostile, name, result, "undocumented exit")
    body = document(result)
    if name.startswith("verdict"):
        if body is None or "verdict" not in body:
            tally.fail(hostile, name, result, "verdict printed no JSON decision")
            return
        admitted = body["verdict"] in {"allow", "warn-90"}
        if must_refuse and admitted:
            tally.fail(hostile, name, result, "admitted after an entry that cannot be folded")
        if control and body["verdict"] != "allow":
            tally.fail(hostile, name, result, "control entry: expected a normal allow")
        if must_refuse and not admitted:
            tally.refused[name] += 1
    elif name in {"tokens-check", "tools-use"}:
        allowed = body is not None and body.get("allowed") is True
        if must_refuse and allowed:
            tally.fail(hostile, name, result, "allowed after an entry that cannot be folded")
        if foreign and not allowed:
            tally.fail(hostile, name, result, "other namespace: expected allowed")
        if must_refuse and not allowed:
            tally.refused[name] += 1


def append_unsigned(home: Path, event_type: str, payload: Any, moment: dt.datetime) -> None:
    """What anyone who can append to the file can write: a line with no signature.

    ``ledger init`` set ``strict_after`` before ``moment``, so the line must be refused.
    """
    import rfc8785

    from ledger.core.envelope import parse_line, unsigned_entry

    chain = home / "events.jsonl"
    prev = parse_line(chain.read_bytes().splitlines()[-1]).entry_hash
    with chain.open("ab") as handle:
        handle.write(rfc8785.dumps(unsigned_entry(event_type, payload, iso(moment), prev)) + b"\n")


def unsigned_entries() -> list[Hostile]:
    """Every event type's valid payload, and loa's forced reconcile to a $0 bill, unsigned."""
    loa_forced_reconcile = {
        "verdict": "reconcile", "counter_usd": 0.75, "billing_usd": 0, "drift_pct": 100,
        "drift_threshold_pct": 5, "blocker": False, "provider": "aggregate", "utc_day": DAY,
        "billing_api_unreachable": False, "force_reconcile": True, "operator_reason": "zero",
    }  # fmt: skip
    entries = [
        Hostile(event_type, "unsigned", "-", payload, signed=False)
        for event_type, payload in sorted(BASES.items())
    ]
    entries.append(
        Hostile("budget.reconcile", "unsigned-loa-forced", "-", loa_forced_reconcile, signed=False)
    )
    return entries


def chain_verifies(home: Path) -> bool:
    """Whether every line of the home's chain verifies against its trust store."""
    from ledger.core.chain import ChainVerifier
    from ledger.edges.files.keyfiles import KeyDir

    verifier = ChainVerifier(KeyDir(home).load_trust())
    lines = (home / "events.jsonl").read_bytes().splitlines(keepends=True)
    return all(verifier.feed(line) for line in lines)


def run_case(
    run: Any,
    tally: Tally,
    base: Path,
    home: Path,
    hostile: Hostile,
    verdict: str,
    names: list[str],
    *,
    as_process: bool,
) -> None:
    shutil.copytree(base, home, copy_function=shutil.copy)  # modes kept, times not
    if hostile.signed:
        forge_entry(home, {"LEDGER_NOW": iso(HOSTILE_AT)}, hostile.event_type, hostile.payload,
                    HOSTILE_AT)  # fmt: skip
    else:
        append_unsigned(home, hostile.event_type, hostile.payload, HOSTILE_AT)
    must_refuse = verdict.startswith("invalid")
    control = (hostile.kind == "as-is" and verdict == "valid") or verdict == "foreign"
    if hostile.event_type == "chain.finding" and verdict == "valid":
        # A sealed BROKEN finding halts the gate until recover: that is what it is for.
        must_refuse, control = True, False
    verifies = chain_verifies(home)
    if not verifies:  # the chain is broken: the gate must halt whatever the entry says
        tally.broken += 1
        must_refuse, control = True, False
    if not hostile.signed:  # after strict_after: refused, whatever its payload
        must_refuse, control = True, False
        if verifies:
            tally.cases += 1
            tally.failed_cases += 1
            tally.fail(hostile, "chain", Result(0, "", ""), "unsigned entry verifies")
    tally.entries[verdict.split(":", maxsplit=1)[0]] += 1
    for name in names:
        args, stdin = COMMANDS[name]
        argv = ["--home", str(home), *args]
        if as_process and name == "verdict":
            result = run_process(argv, env=clean_env(**ENV), stdin=stdin or None, timeout=120)
            tally.processes += 1
        else:
            try:
                result = run(argv, env=ENV, stdin=stdin)
            except BaseException as exc:  # an exception escaping main() is a traceback
                result = Result(70, "", f"Traceback (escaped main): {type(exc).__name__}: {exc}")
        if name == "verify-chain":
            said = (result.code, result.stdout[:3] if result.code == 0 else result.stderr[:12])
            if said != ((0, "OK ") if verifies else (1, "BROKEN line ")):
                tally.fail(
                    hostile, name, result, f"verify-chain disagrees (chain verifies: {verifies})"
                )
        foreign = control and verdict == "foreign"
        judge_command(tally, hostile, name, result, must_refuse, control, foreign)
    shutil.rmtree(home)


@pytest.mark.timeout(sized(600, 7200))
def test_hostile_entries_battery(run_inproc, tmp_path, capsys):
    rng = random.Random(SEED)
    known = schemas()
    missing = set(known) - set(BASES)
    assert not missing, f"schemas without a base payload in BASES (add one): {missing}"
    from jsonschema import Draft202012Validator

    for event_type, schema in known.items():  # the battery's own bases must be valid
        errors = list(Draft202012Validator(schema).iter_errors(BASES[event_type]))
        assert not errors, (event_type, errors[0].message)

    base = tmp_path / "base"
    build_base(run_inproc, base)
    entries: list[Hostile] = []
    for event_type in sorted(BASES):
        for group in mutations(event_type, BASES[event_type]).values():
            # The fields the gate reads inside the free-form ``reading`` object, whose shape
            # no schema states, are tried every time; elsewhere one field per kind unless LONG.
            free = [h for h in group if h.where in READING_FIELDS]
            entries.extend(group if LONG else [rng.choice(group), *free[: rng.randint(1, 2)]])
    unsigned = unsigned_entries()
    entries.extend(unsigned)
    optional = [name for name in COMMANDS if name not in ALWAYS]
    process_every = max(1, len(entries) // PROCESS_CASES)
    tally = Tally()
    kinds = {hostile.kind for hostile in entries}
    for number, hostile in enumerate(entries):
        extra = set(rng.sample(optional, min(EXTRA_COMMANDS, len(optional))))
        names = [name for name in COMMANDS if name in ALWAYS or name in extra]
        run_case(
            run_inproc, tally, base, tmp_path / "case", hostile,
            judge(hostile.event_type, hostile.payload, known), names,
            as_process=number % process_every == 0,
        )  # fmt: skip

    failed = tally.failed_cases
    admitted_unsigned = sum(
        1 for line in tally.failures if any(line.startswith(h.label + " |") for h in unsigned)
    )
    summary(
        capsys, "hostile-entries", tally.cases - failed, failed,
        f"{tally.cases} entry x command cases over {len(entries)} entries: "
        f"{len(BASES)} event types x {len(kinds)} mutation kinds; "
        f"cannot fold {tally.entries['invalid']}, valid {tally.entries['valid']}, "
        f"other namespace {tally.entries['foreign']}; chain BROKEN after {tally.broken}; "
        f"refused {sum(tally.refused.values())} decisions on unfoldable entries; "
        f"unsigned after strict_after {len(unsigned)} entries, {admitted_unsigned} failures; "
        f"real processes {tally.processes}",
    )  # fmt: skip
    assert not tally.failures, tally.report()
