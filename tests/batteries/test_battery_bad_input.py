"""Battery: bad input. Seeded garbage everywhere the product reads, and every case ends
as the contract says.

Areas (seeded ``random.Random``):

* observer output through ``parse_observer_output`` (thousands of documents: wrong
  types, non-finite and negative numbers, bad times, extra and duplicate keys,
  trailing data, non-UTF-8, oversize, random bytes and mutations), plus real observer
  processes that print garbage, exit non-zero, hang past the timeout or flood;
* the config: ``ledger.toml`` garbage, wrong types, out-of-range values, unknown keys
  and sections, edge values, and ``LEDGER_*`` overrides;
* command lines from a grammar of the real commands with bad values and junk tokens;
* ledger lines appended to (or inserted into) a valid chain: non-UTF-8, a 5 MB line,
  100k-level nesting, duplicate keys, NUL bytes, floats, markers, empty lines;
* key files: garbage PEM, other key types, truncated, mode 0644, a directory,
  missing; a garbage trust store; bad ``--key``/``--trust-store``/``--checkpoint``.

Every command must end with a documented exit code (0, 1, 2, 65, 74, 75, 78), at most
one ``ledger: `` (or ``BROKEN line``) line on stderr (exactly one when it printed no
result; plain usage lines may precede it only for exit 2), never ``Traceback``, and
leave the chain's bytes unchanged except for entries legitimately appended (whole
lines that verify and link to the old head). Most cases run in-process; a sample
runs again as real processes and must end the same way.
"""

import datetime as dt
import json
import os
import random
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ledger.core.chain import ChainVerifier
from ledger.core.envelope import parse_line
from ledger.core.observation import Reading, Unreachable, parse_observer_output
from ledger.edges.files.keyfiles import KeyDir
from tests.batteries.common import BASE, build_mixed_home, iso, sized, summary
from tests.conftest import Result, clean_env, run_process

SEED = 65_74_78
DOCUMENTED = frozenset({0, 1, 2, 65, 74, 75, 78})
OBSERVER_CASES = sized(20_000, 100_000)
ARGV_CASES = sized(5000, 25_000)
CONFIG_RANDOM = sized(200, 1000)
NOW = BASE + dt.timedelta(hours=2)
BASE_ENV = {"LEDGER_NOW": iso(NOW), "LEDGER_BILLING_STALE_HALT_PCT": "100"}


def split_lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


# --- the contract -------------------------------------------------------------------------


def contract_problem(result: Result, args: list[str]) -> str | None:
    """What is wrong with how a command ended, or ``None``."""
    if "Traceback" in result.stdout or "Traceback" in result.stderr:
        return "traceback"
    if result.code not in DOCUMENTED:
        return f"undocumented exit {result.code}"
    err = result.stderr.splitlines()
    marked = [line for line in err if line.startswith(("ledger: ", "BROKEN line "))]
    if len(marked) > 1:
        return f"{len(marked)} error lines"
    words = [a for a in args if not a.startswith("-")]
    command = words[0] if words else ""
    free_text = command in {"status", "verify-chain"} and "--json" not in args
    if result.stdout.strip():
        if not free_text:
            try:
                document = json.loads(result.stdout)
            except ValueError:
                return "stdout is not one JSON document"
            if not isinstance(document, dict):
                return "stdout is not a JSON object"
        if len(err) != len(marked):
            return "stray stderr lines beside a result"
        return None
    if result.code == 0:
        return None if len(err) == len(marked) else "stray stderr lines"
    if len(marked) != 1 or err[-1] != marked[0]:
        return "no single error line at the end of stderr"
    if result.code != 2 and len(err) != 1:
        return "lines before the error line"
    return None


def appended_ok(before: bytes, after: bytes, home: Path) -> bool:
    """``after`` is ``before`` plus whole entries that link to its head and verify."""
    if after == before:
        return True
    if not after.startswith(before) or not after.endswith(b"\n") or not before.endswith(b"\n"):
        return False
    try:
        trust = KeyDir(home).load_trust()
        prev = parse_line(split_lines(before)[-1].rstrip(b"\n")).entry_hash if before else "GENESIS"
    except Exception:
        return False
    verifier = ChainVerifier(trust, expected_prev=prev)
    return all(verifier.feed(line) for line in split_lines(after[len(before) :]))


@dataclass
class Tally:
    """Cases per area, and what went wrong."""

    passed: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def add(self, area: str, ok: bool, detail: str) -> None:
        if ok:
            self.passed[area] += 1
        else:
            self.failed[area] += 1
            self.failures.append(f"[{area}] {detail}")


class Harness:
    """Runs one command in-process and judges it against the contract."""

    def __init__(self, run: Callable[..., Result], tally: Tally) -> None:
        self.run_inproc = run
        self.tally = tally

    def check(
        self,
        area: str,
        home: Path,
        args: list[str],
        env: dict[str, str] | None = None,
        *,
        stdin: str = "",
        codes: set[int] | None = None,
        frozen: bool = False,
        message: str | None = None,
        stdout_has: dict[str, Any] | None = None,
        process: bool = False,
    ) -> Result:
        """Run ``ledger --home HOME ARGS``; ``frozen``: the chain must not change at all."""
        chain = home / "events.jsonl"
        before = chain.read_bytes() if chain.exists() else b""
        full_env = {**BASE_ENV, **(env or {})}
        argv = ["--home", str(home), *args]
        try:
            result = self.run_inproc(argv, env=full_env, stdin=stdin)
        except BaseException as exc:  # an exception escaping main() is a traceback
            result = Result(70, "", f"Traceback (escaped main): {type(exc).__name__}: {exc}")
        after = chain.read_bytes() if chain.exists() else b""
        problems = []
        problem = contract_problem(result, args)
        if problem:
            problems.append(problem)
        if codes is not None and result.code not in codes:
            problems.append(f"exit {result.code}, expected one of {sorted(codes)}")
        if frozen and after != before:
            problems.append("chain bytes changed")
        elif not frozen and not appended_ok(before, after, home):
            problems.append("chain changed other than by a valid append")
        if message is not None and message not in result.stderr:
            problems.append(f"message does not name {message!r}")
        if stdout_has:
            try:
                document = json.loads(result.stdout)
                wrong = {k: document.get(k) for k, v in stdout_has.items() if document.get(k) != v}
            except ValueError:
                wrong = {"stdout": result.stdout[:80]}
            if wrong:
                problems.append(f"stdout {wrong}, expected {stdout_has}")
        detail = (
            f"{args[:6]} env={ {k: v[:40] for k, v in (env or {}).items()} }: "
            + "; ".join(problems)
            + f" -> {result.code} {result.stderr[-300:]!r}"
        )
        self.tally.add(area, not problems, detail)
        if process:
            self.again_as_process(area, argv, full_env, stdin, result.code)
        return result

    def again_as_process(
        self,
        area: str,
        argv: list[str],
        env: dict[str, str],
        stdin: str,
        code: int,
        *,
        same_code: bool = True,
    ) -> None:
        """The same command as a real ``python -m ledger`` process: same exit, same contract.

        ``same_code=False`` when the first run changed what the second one sees.
        """
        proc = run_process(argv, env=clean_env(**env), stdin=stdin or None, timeout=120)
        problem = contract_problem(proc, argv[2:])
        ok = problem is None and (proc.code == code or not same_code)
        self.tally.add(
            "process", ok,
            f"({area}) {argv[2:8]}: {problem}; exit {proc.code}, in-process {code}: "
            f"{proc.stderr[-200:]!r}",
        )  # fmt: skip


# --- 1. observer output -------------------------------------------------------------------

VALID_USD = ["0", "1", "12.5", "0.000001", "1e2", "99999.999999", "3.1415926535", "0.0"]
BAD_USD = ["-1", "-0.000001", "NaN", "Infinity", "-Infinity", "1e400", "true", "null", '"5"',
           "[]", "{}", "9007199254.740992", "1e20", '"NaN"', "false"]  # fmt: skip
VALID_TS = ["2026-03-01T12:00:00Z", "2026-03-01T12:00:00.123456+00:00",
            "2026-03-01T14:00:00+02:00", "2026-03-01T11:59:59.5Z", "2030-01-01T00:00:00Z"]  # fmt: skip
BAD_TS = ["2026-13-01T00:00:00Z", "yesterday", "2026-03-01T12:00:00", "", "12345", "null",
          "2026-03-01", "2026-02-30T00:00:00Z", "2026-03-01T12:00:00+25:00", "[]",
          "0000-01-01T00:00:00Z", "2026-03-01T25:00:00Z"]  # fmt: skip


def _ts_json(text: str) -> str:
    return text if text in {"12345", "null", "[]"} else json.dumps(text)


def observer_document(rng: random.Random) -> tuple[bytes, bool]:
    """An observer's stdout and whether it must NOT be read as a reading."""
    kind = rng.random()
    if kind < 0.1:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 120))), True
    if kind < 0.2:
        signal = rng.choice(["_unreachable", "_defer"])
        parts = [f'"{signal}": {rng.choice(["true", "false", "1", "null"])}']
        if rng.random() < 0.7:
            parts.append('"_reason": ' + rng.choice(['"down"', "5", "null", json.dumps("x" * 900)]))
        if rng.random() < 0.3:
            parts.append('"usd_used": 5')
        return ("{" + ", ".join(parts) + "}").encode(), True
    bad = False
    usd = rng.choice(VALID_USD)
    if rng.random() < 0.35:
        usd, bad = rng.choice(BAD_USD), True
    billing = rng.choice(VALID_TS)
    if rng.random() < 0.25:
        billing, bad = rng.choice(BAD_TS), True
    fields = [f'"usd_used": {usd}', f'"billing_ts": {_ts_json(billing)}']
    if rng.random() < 0.3:
        if rng.random() < 0.3:
            fields.append(f'"server_ts": {_ts_json(rng.choice(BAD_TS[:5]))}')
            bad = True
        else:
            fields.append(f'"server_ts": {json.dumps(rng.choice(VALID_TS))}')
    if rng.random() < 0.1:
        fields.pop(rng.randrange(2))  # usd_used or billing_ts
        bad = True
    if rng.random() < 0.1:
        fields.append(rng.choice(['"extra": 1', '"USD_USED": 1', '"_reason": "x"']))
        bad = True
    if rng.random() < 0.07:
        fields.append(fields[0])  # duplicate key
        bad = True
    rng.shuffle(fields)
    text = "{" + ", ".join(fields) + "}"
    wrap = rng.random()
    if wrap < 0.05:
        text, bad = text + " {}", True
    elif wrap < 0.1:
        text, bad = "[" + text + "]", True
    elif wrap < 0.13:
        text, bad = text + " trailing", True
    elif wrap < 0.16:
        text = "\n  " + text + "\n\n"
    elif wrap < 0.19:
        text += " " * (70 * 1024)  # over 64 KiB: the runner's limit, not the parser's
    data = text.encode()
    mutate = rng.random()
    if mutate < 0.05:
        data, bad = b"\xef\xbb\xbf" + data, True  # a BOM is not JSON
    elif mutate < 0.08:
        data, bad = text.encode("utf-16"), True
    elif mutate < 0.11:
        cut = rng.randrange(len(data))
        data, bad = data[:cut] + b"\xff" + data[cut:], True
    elif mutate < 0.2:  # random byte edits: anything may come out, but never an exception
        blob = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        data = bytes(blob)
        bad = False  # unknown either way: only the invariants are checked
    return data, bad


def observer_battery(tally: Tally, rng: random.Random) -> Counter[str]:
    fetched = NOW
    kinds: Counter[str] = Counter()
    for _ in range(OBSERVER_CASES):
        data, must_fail = observer_document(rng)
        try:
            result = parse_observer_output(rng.choice(["aggregate", "openai"]), data, fetched)
        except Exception as exc:
            tally.add("observer", False, f"{data[:80]!r}: raised {type(exc).__name__}: {exc}")
            continue
        kinds[type(result).__name__] += 1
        problem = None
        if type(result).__name__ not in {"Reading", "Unreachable", "Deferred"}:
            problem = f"returned {type(result).__name__}"
        elif isinstance(result, Reading):
            if must_fail:
                problem = "read as a reading"
            elif not 0 <= result.usd_used_micros <= 2**53 - 1 or result.billing_ts.tzinfo is None:
                problem = f"reading out of range: {result}"
        elif isinstance(result, Unreachable) and not result.reason:
            problem = "unreachable without a reason"
        if problem is None and isinstance(result, Reading):
            # (the product strips Unicode whitespace around the object, as str.strip does)
            document, _end = json.JSONDecoder(parse_float=Decimal).raw_decode(
                data.decode("utf-8").lstrip()
            )
            expected = Decimal(str(document["usd_used"])) * 1_000_000
            if result.usd_used_micros != int(expected.to_integral_value(rounding="ROUND_CEILING")):
                problem = f"amount {result.usd_used_micros} micros for {document['usd_used']}"
        tally.add("observer", problem is None, f"{data[:100]!r}: {problem}")
    return kinds


OBSERVER_SCRIPTS = {
    "garbage": ("print('not json at all')", 2),
    "silent": ("pass", 2),
    "exit-3": ("import sys; print('{\"usd_used\": 1, \"billing_ts\": \"2026-03-01T12:00:00Z\"}'); sys.exit(3)", 2),
    "hang": ("import time; time.sleep(30)", 2),
    "flood": ("import sys; sys.stdout.write('{' + ' ' * 200000 + '}')", 2),
    "nan": ("print('{\"usd_used\": NaN, \"billing_ts\": \"2026-03-01T12:00:00Z\"}')", 2),
    "negative": ("print('{\"usd_used\": -3, \"billing_ts\": \"2026-03-01T12:00:00Z\"}')", 2),
    "binary": ("import sys; sys.stdout.buffer.write(bytes(range(256)))", 2),
    "defer": ("print('{\"_defer\": true, \"_reason\": \"billing API busy\"}')", 2),
    "unreachable": ("print('{\"_unreachable\": true, \"_reason\": \"down\"}')", 2),
    "stderr-spam": ("import sys; sys.stderr.write('x' * 300000); print('{}')", 2),
    "valid": ("print('{\"usd_used\": REPLACE, \"billing_ts\": \"" + iso(NOW) + "\"}')", 0),
}  # fmt: skip


def real_observers(h: Harness, home: Path, workdir: Path) -> None:
    near = workdir / "near-cap"
    shutil.copytree(home, near)  # before any fresh reading is recorded
    used = json.loads(h.check("observer-run", home, ["usage"]).stdout)["usd_used_micros"]
    for name, (source, code) in OBSERVER_SCRIPTS.items():
        script = workdir / f"observer-{name}.py"
        script.write_text(source.replace("REPLACE", f"{used / 1e6:.6f}"))
        env = {
            "LEDGER_OBSERVER_COMMAND": json.dumps([sys.executable, str(script)]),
            "LEDGER_OBSERVER_TIMEOUT_SECONDS": "1",
        }
        h.check("observer-run", home, ["reconcile"], env, codes={code}, process=name == "garbage")
    # a verdict near the cap runs the observer itself; a broken one means billing_stale
    h.check("observer-run", near, ["record", "95", "--provider", "openai"], {})
    script = workdir / "observer-garbage.py"
    env = {
        "LEDGER_OBSERVER_COMMAND": json.dumps([sys.executable, str(script)]),
        "LEDGER_BILLING_STALE_HALT_PCT": "75",
    }
    h.check(
        "observer-run", near, ["verdict", "1"], env, codes={1},
        stdout_has={"verdict": "halt-uncertainty", "uncertainty_reason": "billing_stale"},
    )  # fmt: skip


# --- 2. config ----------------------------------------------------------------------------

BAD_BY_KIND = {
    "cap": ['"abc"', "-1", "true", "[]", "{}", "nan", "inf", "-inf", "1e400", "9007199254.740992", '""'],
    "pct": ["101", "-0.5", '"x"', "nan", "inf", "true", "[1]", "100.0001", "{}"],
    "seconds": ["-1", "1.5", '"x"', "true", "[]", "nan", "inf", '"-3"', "{}"],
    "hours": ["0", "-1", "nan", "inf", '"x"', "true", "[]"],
    "argv": ['"x"', "[]", "[1]", '[""]', '["a", 2]', "{}", "5"],
    "providers": ["[]", '["Bad"]', '"aggregate"', "[1]", f'["{"a" * 65}"]', '["-x"]'],
    "cron": ['"* * *"', "5", '"* * * * * *"', '"; rm -rf /"', '""', "[]"],
    "caps": ["{ OpenAI = 5 }", "{ openai = -1 }", "{ aggregate = 5 }", "5",
             '{ openai = "x" }', "{ openai = nan }", "[]"],
}  # fmt: skip
KEYS = {
    ("usd", "daily_cap"): "cap", ("usd", "provider_caps"): "caps", ("usd", "warn_pct"): "pct",
    ("usd", "reservation_ttl_seconds"): "seconds", ("billing", "freshness_seconds"): "seconds",
    ("billing", "stale_halt_pct"): "pct", ("billing", "stale_seconds"): "seconds",
    ("billing", "provider_lag_seconds"): "seconds",
    ("billing", "clock_tolerance_seconds"): "seconds", ("billing", "poll_seconds"): "seconds",
    ("observer", "command"): "argv",
    ("observer", "timeout_seconds"): "seconds", ("reconcile", "interval_hours"): "hours",
    ("reconcile", "drift_threshold_pct"): "pct", ("reconcile", "providers"): "providers",
    ("snapshot", "cron"): "cron", ("snapshot", "keep_days"): "seconds",
    ("chain", "lock_timeout_seconds"): "seconds",
}  # fmt: skip
ENV_BAD_BY_KIND = {
    "cap": ["abc", "-1", "nan", "inf", "1e400", "", "1 2"],
    "pct": ["101", "-1", "x", "nan", "", "1e3"],
    "seconds": ["-1", "1.5", "x", "", "1e3", "0x10"],
    "hours": ["0", "-2", "nan", "x", ""],
    "argv": ["not json", "[]", "[1]", '"str"', "{}", ""],
    "providers": ["[]", '["Bad"]', "aggregate", "[1]", ""],
    "cron": ["* * *", "", "1 2 3 4 5 6"],
    "caps": ['{"OpenAI": 5}', "[1]", '{"openai": -1}', "not json", '{"aggregate": 1}'],
}
# Values in range that are extreme: the product must still end as the contract says.
EDGE_VALUES = {
    "seconds": ["0", "99999999999999999999", "100000000000", "315360000000"],
    "pct": ["0", "100", "0.0001"],
    "hours": ["0.0001", "1e9"],
    "cap": ["0", "9007199254.740991", "0.000001"],
}


def toml_for(section: str, key: str, value: str) -> str:
    """A valid config (cap 100) with ``section.key = value``."""
    tables: dict[str, dict[str, str]] = {"usd": {"daily_cap": "100"}}
    tables.setdefault(section, {})[key] = value
    return "".join(
        f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in body.items())
        for name, body in tables.items()
    )


def config_battery(h: Harness, home: Path, rng: random.Random) -> None:
    config = home / "ledger.toml"
    original = config.read_bytes()

    count = 0

    def case(
        text: bytes | str, args: list[str], env: dict[str, str] | None = None, **kw: Any
    ) -> None:
        nonlocal count
        count += 1
        config.write_bytes(text.encode() if isinstance(text, str) else text)
        try:
            h.check("config", home, args, env, process=count % 60 == 0, **kw)
        finally:
            config.write_bytes(original)

    for (section, key), kind in KEYS.items():
        for value in BAD_BY_KIND[kind]:
            case(
                toml_for(section, key, value),
                ["verdict", "1"],
                codes={78},
                message=f"{section}.{key}",
            )
        variable = f"LEDGER_{section}_{key}".upper()
        for value in ENV_BAD_BY_KIND[kind]:
            case(original, ["verdict", "1"], {variable: value}, codes={78}, message=variable)
        for value in EDGE_VALUES.get(kind, []):
            for args in (
                ["verdict", "1"],
                ["snapshot"],
                ["tokens", "check", "convoy-a", "agent-9", "10"],
            ):
                case(toml_for(section, key, value), args, codes={0, 1, 2, 78})
    structural = [
        ("[usd]\ndaily_cap = 100\nunknown = 1\n", "usd.unknown"),
        ("[usd]\ndaily_cap = 100\n[nonsense]\nx = 1\n", "nonsense"),
        ("usd = 5\n", "usd"),
        ("[usd]\ndaily_cap = 100\ndaily_cap = 200\n", "ledger.toml"),
        ("[usd\ndaily_cap = 100\n", "ledger.toml"),
        ("\xff\xfe\x00garbage", "ledger.toml"),
        ("[usd]\ndaily_cap = 100\n[usd.provider_caps]\nopenai = 5\n[usd.provider_caps.deep]\nx = 1\n", "usd.provider_caps"),
        ("[[usd]]\ndaily_cap = 100\n", "usd"),
    ]  # fmt: skip
    for text, named in structural:
        case(text, ["verdict", "1"], codes={78}, message=named)
    case("", ["verdict", "1"], codes={78}, message="usd.daily_cap")  # no cap configured
    case(original, ["verdict", "1"], {"LEDGER_NOW": "not a time"}, codes={78}, message="LEDGER_NOW")
    case(original, ["verdict", "1"], {"LEDGER_NO_SUCH_KEY": "x", "LEDGER_USD": "1"}, codes={0})
    case(original, ["daemon"], {"LEDGER_NOW": iso(NOW)}, codes={78})
    tokens = ["[usd]", "daily_cap", "=", "100", '"x"', "[", "]", "{", "}", "\n", "#", "nan",
              "[billing]", "stale_halt_pct", "=", "\x00", "é", "1e400", ",", '"""', "'"]  # fmt: skip
    for _ in range(CONFIG_RANDOM):
        if rng.random() < 0.5:
            junk: bytes | str = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
        else:
            junk = " ".join(rng.choice(tokens) for _ in range(rng.randint(1, 30)))
        case(junk, [rng.choice(["verdict", "usage", "reconcile", "snapshot"]), *(["1"] if rng.random() < 0.3 else [])],
             codes={0, 1, 2, 78})  # fmt: skip


# --- 3. command lines ---------------------------------------------------------------------

AMOUNTS_OK = ["1", "0.5", "0", "2.25"]
AMOUNTS_BAD = ["-1", "nan", "inf", "1e400", "", "abc", "0x10", "１", "9" * 400, "-0", "1e-12",
               "1,5", " 3", "1_000", "--", "9007199254.740992", "٣"]  # fmt: skip
PROVIDERS_BAD = ["OpenAI", "", "a" * 65, "../x", "aggregate;", "ä", "1abc", "-x", "open ai"]
INTS_BAD = ["-5", "abc", "1.5", "9" * 100, "", "0x10", "1e3", "-0", "9007199254740991",
            "99999999999999", "999999999999"]  # fmt: skip
REFS_BAD = ["zz", "A" * 64, "0" * 63, "", "g" * 64, "0" * 65]
TEXTS = ["x" * 300, "é", "line\nbreak", "\t", "ok-text", "--", "x" * 256]
NAMES_BAD = ["", "Bad Name", "../x", "a" * 300, "-x", "ä"]
TS_BAD = ["tomorrow", "2026-13-01T00:00:00Z", "2026-03-01T12:00:00", "", "99999-01-01T00:00:00Z"]


class ArgvGrammar:
    """Random command lines of the real commands; most slots hold bad values."""

    def __init__(self, rng: random.Random, paths: list[str]) -> None:
        self.rng = rng
        self.paths = paths

    def pick(self, good: list[str], bad: list[str], p_bad: float = 0.6) -> str:
        return self.rng.choice(bad if self.rng.random() < p_bad else good)

    def opt(self, name: str, value: str, p: float = 0.4) -> list[str]:
        return [name, value] if self.rng.random() < p else []

    def amount(self) -> str:
        return self.pick(AMOUNTS_OK, AMOUNTS_BAD)

    def provider(self) -> str:
        return self.pick(["openai", "anthropic", "aggregate"], PROVIDERS_BAD)

    def integer(self) -> str:
        return self.pick(["0", "10", "1000"], INTS_BAD)

    def name(self) -> str:
        return self.pick(["convoy-a", "wf-1", "agent-1"], NAMES_BAD, 0.4)

    def path(self) -> str:
        return self.rng.choice(self.paths)

    def command(self) -> list[str]:
        r, o = self.rng, self.opt
        which = r.randrange(24)
        if which == 0:
            return ["verdict", self.amount(), *o("--provider", self.provider()),
                    *o("--cycle-id", r.choice(TEXTS)), *o("--agent", r.choice(TEXTS))]  # fmt: skip
        if which == 1:
            return ["record", self.amount(), *o("--provider", self.provider(), 0.8),
                    *o("--verdict-ref", r.choice(REFS_BAD)), *o("--model-id", r.choice(TEXTS)),
                    *o("--input-tokens", self.integer()), *o("--output-tokens", self.integer())]  # fmt: skip
        if which == 2:
            return ["usage", *o("--provider", self.provider())]
        if which == 3:
            return [
                "reconcile",
                *o("--provider", self.provider()),
                *o("--force-reason", r.choice(["", " ", *TEXTS])),
            ]
        if which == 4:
            args = ["verify-chain"]
            if r.random() < 0.5:
                args.append(self.path())
            args += o("--key", r.choice([self.path(), "abc=" + self.path(), "="]))
            args += o("--trust-store", self.path()) + o("--checkpoint", self.path())
            return args + [f for f in ("--strict", "--allow-markers", "--json") if r.random() < 0.3]
        if which == 5:
            return ["checkpoint"]
        if which == 6:
            return ["snapshot"]
        if which == 7:
            return [
                "recover",
                *o("--snapshot", self.path()),
                *(["--dry-run"] if r.random() < 0.7 else []),
            ]
        if which == 8:
            return ["rebuild-state"]
        if which == 9:
            return ["init", *o("--daily-cap-usd", self.amount())]
        if which == 10:
            return ["keys", "rotate", *o("--root-key", self.path(), 0.7)]
        if which == 11:
            return ["tokens", "create", self.name(), *o("--convoy-max", self.integer()),
                    *o("--agent-max", self.integer()), *o("--warn-pct", self.pick(["80"], ["101", "-1", "x"]))]  # fmt: skip
        if which == 12:
            return ["tokens", "check", self.name(), self.name(), self.integer()]
        if which == 13:
            return ["tokens", "record", self.name(), self.name(), self.integer(), self.integer(),
                    *o("--check-ref", r.choice(REFS_BAD))]  # fmt: skip
        if which == 14:
            return [
                "tokens",
                r.choice(["list", "report", "delete"]),
                *([self.name()] if r.random() < 0.7 else []),
            ]
        if which == 15:
            return [
                "turns",
                "create",
                self.name(),
                *o("--total", self.integer(), 0.8),
                *o("--phase", self.integer(), 0.8),
            ]
        if which == 16:
            return ["turns", r.choice(["record", "check", "phase"]), self.name(),
                    *o("--type", r.choice(["tool_use", "bogus", ""]))]  # fmt: skip
        if which == 17:
            return ["tools", "create", self.name(), *o("--role", r.choice(["explorer", "king", ""]), 0.8),
                    *o("--files", self.integer()), *o("--framework-confidence", self.pick(["0.5"], ["2", "x", "nan"]))]  # fmt: skip
        if which == 18:
            return ["tools", r.choice(["use", "check"]), self.name()]
        if which == 19:
            return [
                "time",
                "start",
                *o("--budget-seconds", self.integer()),
                *o("--end", r.choice(TS_BAD)),
            ]
        if which == 20:
            return ["time", "status"]
        if which == 21:
            return ["status", *(["--json"] if r.random() < 0.5 else [])]
        if which == 22:
            return [r.choice(["bogus", "verdicts", "VERDICT", "keys", "tokens", "turns", ""])]
        return [
            r.choice(["verdict", "record", "usage", "reconcile"]),
            *[r.choice(AMOUNTS_BAD) for _ in range(r.randint(0, 3))],
        ]

    def argv(self) -> list[str]:
        args = self.command()
        r = self.rng
        if r.random() < 0.25:  # junk tokens
            junk = r.choice(
                ["--unknown", "--provider", "--", "-x", "--json", "extra", "--home", "--cycle-id"]
            )
            args.insert(r.randint(1, len(args)) if len(args) > 1 else len(args), junk)
        if r.random() < 0.05:
            args.append(args[-1])
        return args


HOOK_INPUTS = ["", "not json", "{}", "[]", "null", '{"tool_name": 5}', '{"hook_event_name": "PreToolUse"}',
               json.dumps({"tool_name": "Bash", "tool_input": {"command": "x" * 100_000}}), "\x00\x01",
               '{"tool_name": "Edit", "tool_input": []}', "{" * 5000]  # fmt: skip


def argv_battery(h: Harness, home: Path, fresh: Path, rng: random.Random, paths: list[str]) -> None:
    """Random command lines against ``home``, renewed from ``fresh`` every few hundred cases
    (so the chain every command verifies stays small and the cost per case flat)."""
    grammar = ArgvGrammar(rng, paths)
    for number in range(ARGV_CASES):
        if number and number % 400 == 0:
            shutil.rmtree(home)
            shutil.copytree(fresh, home)
        args = grammar.argv()
        if "--help" in args or "-h" in args:
            continue
        result = h.check("argv", home, args)
        if number % 70 == 0:  # the home moved on: same contract, maybe another exit
            argv = ["--home", str(home), *args]
            h.again_as_process("argv", argv, BASE_ENV, "", result.code, same_code=False)
    for stdin in HOOK_INPUTS:
        for which in ("pre-tool-use", "post-tool-use"):
            env = {"LEDGER_AGENT": "tool-agent", "LEDGER_WORKFLOW": "wf-1"}
            result = h.check("argv", home, ["hook", which], env, stdin=stdin, codes={0})
            if stdin in {"", "not json", "\x00\x01", "{" * 5000} and result.stdout.strip():
                h.tally.add(
                    "argv",
                    False,
                    f"hook {which} gave a decision for malformed stdin {stdin[:20]!r}",
                )


# --- 4. ledger lines ----------------------------------------------------------------------


def bad_lines(valid_last: bytes) -> dict[str, bytes]:
    """Damaged lines to put after (or among) a valid chain's lines."""
    entry = json.loads(valid_last)
    dup = valid_last.rstrip(b"\n")[:-1] + b',"ts_utc":"2026-03-01T12:00:00.000000Z"}\n'
    nul = valid_last[:40] + b"\x00" + valid_last[40:]
    float_entry = dict(entry, payload={**entry["payload"], "actual_micros": 1.5})
    huge_int = dict(entry, payload={**entry["payload"], "actual_micros": 2**80})
    return {
        "non-utf8": b'{"a": "\xff\xfe\x80"}\n',
        "non-utf8-in-entry": valid_last[:60] + b"\xc3\x28" + valid_last[60:],
        "5MB-line": b'{"schema_version":"1.1.0","x":"' + b"x" * 5_000_000 + b'"}\n',
        "5MB-torn": b'{"x":"' + b"y" * 5_000_000,
        "nested-100k": b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n",
        "nested-arrays": b'{"payload":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        "duplicate-key": dup,
        "nul-byte": nul,
        "nul-only": b"\x00\x00\x00\n",
        "empty": b"\n",
        "spaces": b"   \t \n",
        "empty-object": b"{}\n",
        "null": b"null\n",
        "number": b"12345\n",
        "string": b'"hello"\n',
        "marker": b"[legacy marker]\n",
        "float": json.dumps(float_entry).encode() + b"\n",
        "huge-int": json.dumps(huge_int).encode() + b"\n",
        "crlf": valid_last.rstrip(b"\n") + b"\r\n",
        "bom": b"\xef\xbb\xbf" + valid_last,
        "copy-of-last": valid_last,
        "torn-copy": valid_last[: len(valid_last) // 2],
        "unicode-escape": valid_last.replace(b'"schema_version":"1.1.0"', b'"schema_version":"1\\u002e1.0"'),
    }  # fmt: skip


def parses(line: bytes) -> bool:
    """Whether a line is a well-formed entry (whatever its link and signature)."""
    if not line.endswith(b"\n"):
        return False
    try:
        parse_line(line[:-1])
    except Exception:
        return False
    return True


def lines_battery(h: Harness, mixed_home: Path, workdir: Path, rng: random.Random) -> None:
    original = (mixed_home / "events.jsonl").read_bytes()
    lines = split_lines(original)
    n = len(lines)
    for name, bad in bad_lines(lines[-1]).items():
        for position in ("end", "middle"):
            if position == "middle" and not bad.endswith(b"\n"):
                continue
            home = workdir / f"line-{name}-{position}"
            shutil.copytree(mixed_home, home)
            k = n + 1 if position == "end" else rng.randint(2, n)
            damaged = [*lines[: k - 1], bad, *lines[k - 1 :]]
            (home / "events.jsonl").write_bytes(b"".join(damaged))
            # Nothing may be built on a last line that is not an entry (SPEC §2); after a
            # well-formed last line (a copy, or damage further up) a validly signed,
            # linked halt or record may be appended: spend is never refused.
            frozen = position == "end" and not parses(bad)
            heavy = name in {"5MB-line", "nested-100k", "non-utf8"}
            h.check("lines", home, ["verify-chain"], codes={1}, frozen=True,
                    message=f"BROKEN line {k}: ", process=heavy)  # fmt: skip
            h.check(
                "lines", home, ["verdict", "1"], codes={1}, frozen=frozen, process=heavy,
                stdout_has={"verdict": "halt-uncertainty", "uncertainty_reason": "counter_inconsistent"},
            )  # fmt: skip
            if frozen:
                h.check("lines", home, ["record", "1", "--provider", "openai"], codes={74}, frozen=True,
                        message="ledger recover")  # fmt: skip
            h.check("lines", home, ["tokens", "check", "convoy-a", "agent-1", "10"], codes={0, 1, 74},
                    frozen=frozen)  # fmt: skip
            h.check("lines", home, ["usage"], codes={0}, frozen=True)
            h.check("lines", home, ["checkpoint"], codes={1, 74}, frozen=True)
            h.check("lines", home, ["snapshot"], codes={1, 74}, frozen=True)
            h.check("lines", home, ["verify-chain", "--json"], codes={1}, frozen=True)
            shutil.rmtree(home)


# --- 5. key files -------------------------------------------------------------------------


def foreign_keys() -> dict[str, bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, rsa, x25519

    def pem(key: Any) -> bytes:
        return bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    def pub(key: Any) -> bytes:
        return bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    return {
        "rsa": pem(rsa_key),
        "ec-p256": pem(ec_key),
        "ed448": pem(ed448.Ed448PrivateKey.generate()),
        "x25519": pem(x25519.X25519PrivateKey.generate()),
        "rsa-public": pub(rsa_key),
    }


def keys_battery(h: Harness, mixed_home: Path, workdir: Path) -> None:
    trust = KeyDir(mixed_home).load_trust()
    active = next(k.key_id for k in trust.keys if k.valid_until is None)
    good_pem = (mixed_home / "keys" / f"{active}.key.pem").read_bytes()
    public_pem = (mixed_home / "keys" / f"{active}.pub.pem").read_bytes()
    others = foreign_keys()
    contents: dict[str, bytes | None] = {
        "garbage-text": b"hello, I am not a key\n",
        "garbage-pem": b"-----BEGIN PRIVATE KEY-----\nnot base64 !!!\n-----END PRIVATE KEY-----\n",
        "truncated": good_pem[: len(good_pem) // 2],
        "truncated-body": good_pem.replace(good_pem.splitlines()[1], good_pem.splitlines()[1][:20]),
        "empty": b"",
        "binary": bytes(range(256)),
        "public-instead": public_pem,
        "encrypted-looking": b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        **{f"other-{k}": v for k, v in others.items()},
        "mode-0644": good_pem,
        "directory": None,
        "directory-0700": None,
        "missing": None,
    }
    halt = {"verdict": "halt-uncertainty", "uncertainty_reason": "counter_inconsistent"}
    for name, data in contents.items():
        home = workdir / f"key-{name}"
        shutil.copytree(mixed_home, home)
        path = home / "keys" / f"{active}.key.pem"
        path.unlink()
        if name.startswith("directory"):
            path.mkdir(mode=0o700 if name.endswith("0700") else 0o755)
            path.chmod(0o700 if name.endswith("0700") else 0o755)
        elif data is not None:
            path.write_bytes(data)
            path.chmod(0o644 if name == "mode-0644" else 0o600)
        h.check("keys", home, ["verdict", "1"], codes={1}, frozen=True, stdout_has=halt,
                process=name in {"mode-0644", "directory", "other-rsa"})  # fmt: skip
        h.check("keys", home, ["record", "1", "--provider", "openai"], codes={65}, frozen=True,
                process=name in {"garbage-pem", "missing"})  # fmt: skip
        h.check("keys", home, ["checkpoint"], codes={65}, frozen=True)
        h.check("keys", home, ["keys", "rotate"], codes={65}, frozen=True)
        h.check("keys", home, ["snapshot"], codes={65}, frozen=True)
        h.check(
            "keys",
            home,
            ["tokens", "check", "convoy-a", "agent-1", "10"],
            codes={1, 65},
            frozen=True,
        )
        h.check("keys", home, ["verify-chain"], codes={0}, frozen=True)
        shutil.rmtree(home)
    # a damaged trust store
    for name, data in {
        "trust-garbage": b"not json",
        "trust-wrong-format": b'{"format": "other"}',
        "trust-bad-key": b'{"format":"ledger-trust/1","keys":[{"key_id":"AB","public_key":"x"}]}',
        "trust-short-key": b'{"format":"ledger-trust/1","keys":[{"key_id":"ab","public_key":"AAAA"}]}',
        "trust-empty": b"",
        "trust-deep": b"[" * 100_000 + b"]" * 100_000,
    }.items():
        home = workdir / name
        shutil.copytree(mixed_home, home)
        (home / "trust.json").write_bytes(data)
        h.check("keys", home, ["verdict", "1"], codes={1}, frozen=True, stdout_has=halt)
        h.check("keys", home, ["record", "1", "--provider", "openai"], codes={65}, frozen=True)
        h.check("keys", home, ["verify-chain"], codes={65}, frozen=True)
        h.check("keys", home, ["checkpoint"], codes={65}, frozen=True)
        shutil.rmtree(home)
    # files named on verify-chain's command line
    bad_files = workdir / "bad-files"
    bad_files.mkdir()
    named: dict[str, Path] = {}
    for name, data in {**others, "garbage": b"junk", "empty": b"", "deep": b"[" * 100_000}.items():
        named[name] = bad_files / name
        named[name].write_bytes(data)
    named["directory"] = bad_files
    named["missing"] = bad_files / "missing"
    for path in named.values():
        for option in ("--key", "--trust-store", "--checkpoint"):
            h.check(
                "keys", mixed_home, ["verify-chain", option, str(path)], codes={65}, frozen=True
            )
        h.check("keys", mixed_home, ["verify-chain", str(mixed_home / "events.jsonl"), "--key", f"{active}={path}"],
                codes={65}, frozen=True)  # fmt: skip
    h.check(
        "keys",
        mixed_home,
        ["recover", "--snapshot", str(named["garbage"])],
        codes={0, 65},
        frozen=True,
    )


def distinct(failures: list[str]) -> list[str]:
    """One example of each kind of failure (numbers and paths masked), with its count."""
    kinds: dict[str, list[str]] = {}
    for failure in failures:
        area, _, rest = failure.partition("] ")
        command = rest.split("env=")[0]
        message = rest.rsplit(" -> ", 1)[-1]
        key = area + command[:30] + re.sub(r"/\S+|\d+", "#", message)[:120]
        kinds.setdefault(key, []).append(failure)
    return [f"{len(found)} x {found[0]}" for found in kinds.values()]


# --- the battery --------------------------------------------------------------------------


@pytest.mark.timeout(sized(900, 5400))
def test_bad_input_battery(run_inproc, tmp_path, capsys):
    rng = random.Random(SEED)
    tally = Tally()
    h = Harness(run_inproc, tally)
    mixed = build_mixed_home(run_inproc, tmp_path / "mixed", tmp_path / "mixed-work")
    kinds = observer_battery(tally, rng)
    work = tmp_path / "work"
    work.mkdir()
    scratch = tmp_path / "scratch-home"
    shutil.copytree(mixed.home, scratch)
    real_observers(h, scratch, work)
    config_home = tmp_path / "config-home"
    shutil.copytree(mixed.home, config_home)
    config_battery(h, config_home, rng)
    argv_home = tmp_path / "argv-home"
    shutil.copytree(mixed.home, argv_home)
    garbage = work / "garbage.bin"
    garbage.write_bytes(os.urandom(300))
    paths = [str(work / "nope"), str(work), "/dev/null", str(garbage), str(argv_home / "events.jsonl"),
             str(argv_home / "trust.json"), "", "-"]  # fmt: skip
    argv_battery(h, argv_home, mixed.home, rng, paths)
    lines_battery(h, mixed.home, work, rng)
    keys_battery(h, mixed.home, work)

    passed, failed = sum(tally.passed.values()), sum(tally.failed.values())
    areas = sorted(set(tally.passed) | set(tally.failed))
    figures = ", ".join(f"{a} {tally.passed[a]}/{tally.passed[a] + tally.failed[a]}" for a in areas)
    summary(
        capsys, "bad-input", passed, failed,
        f"{figures}; observer results {dict(kinds)}; tracebacks "
        f"{sum('traceback' in f for f in tally.failures)}, undocumented exits "
        f"{sum('undocumented exit' in f for f in tally.failures)}",
    )  # fmt: skip
    assert not tally.failures, "\n".join(distinct(tally.failures)[:30])
