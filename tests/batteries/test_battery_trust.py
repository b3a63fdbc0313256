"""Battery: trust changes. Revoke, rotate and hand-edit the trust store between verdicts;
after every change the gate agrees with ``verify-chain``.

Changes: ``ledger keys rotate``; ``ledger keys revoke KEY [--reason R] [--at ISO]`` (entirely,
from before, at and after the key's entries); hand edits of ``trust.json`` — a key removed,
a key's ``valid_from`` / ``valid_until`` narrowed (to an entry's time, a microsecond either
side) or widened, a revocation added by hand (of a retired key, of the active key from the
past or the future, of a key nobody knows), a public key swapped, ``strict_after`` set or
cleared — and the original trust store put back. Each single change runs on a copy of one
home (two keys, a rotation between them, spend and a convoy); seeded sequences of changes,
spend and rotations run on one home each.

After each change (SPEC §2 "Keys and trust", §4 "What the counter is held against"):

* ``verify-chain`` reports what an independent model of the trust store says: the first
  line whose key is unknown, swapped, revoked at its time, or not valid at its time;
* BROKEN → ``verdict`` (with and without ``--provider``) halts ``counter_inconsistent``
  (exit 1) and ``tokens check`` is refused;
* OK → ``verdict`` decides normally (``allow``/``warn-90``, exit 0) and ``tokens check`` is
  allowed — unless the trust store leaves no usable writer key at that time (the open-ended
  key revoked, not yet valid, or gone), when the verdict cannot be recorded (exit 1);
* what the gate wrote meanwhile verifies: OK stays OK, BROKEN stays BROKEN at the same line.

Includes SPEC's sequence: ``record 2 --provider openai; keys rotate; verdict 0.5;
keys revoke OLD --reason compromised`` → ``BROKEN line 1`` and the verdict halts.

Defect this battery found (it fails while it is present): **the writer signs with a key the
trust store says it may not use at that time.** When the open-ended (active) key is revoked
from a time already past, or its ``valid_from`` lies in the future, the chain still verifies
(the key signed nothing at those times yet), and ``verdict`` answers ``allow`` (exit 0) and
seals that verdict with the key anyway; the entry it wrote is then rejected by
``verify-chain`` — and the gate never notices: the entries it sealed were folded as they
were written, the trust store is the one the state was verified under, so every later
``verdict`` still answers ``allow`` (and ``tokens check`` allows, ``usage`` reports no
uncertainty) while ``verify-chain`` says ``BROKEN`` (SPEC §4 row 1), until an operator runs
``rebuild-state``. Repro::

    export LEDGER_NOW=2026-06-01T12:00:00Z
    ledger --home H init --daily-cap-usd 10
    ledger --home H verdict 1                       # allow, exit 0
    # hand edit H/trust.json: add to "revocations"
    #   {"key_id": "<the home's only key>", "revoked_at": "2026-06-01T12:00:01.000000Z",
    #    "reason": "compromised"}
    export LEDGER_NOW=2026-06-01T12:00:05Z
    ledger --home H verify-chain                    # OK 1 entries, exit 0
    ledger --home H verdict 1                       # {"verdict": "allow", ...}, exit 0
    ledger --home H verify-chain                    # BROKEN line 2: signing key … is revoked
    ledger --home H verdict 1                       # still {"verdict": "allow", ...}, exit 0

(likewise after ``keys rotate`` and setting the new key's ``valid_from`` to next year:
``BROKEN line N: signing key … is not valid at …``). Expected (SPEC §3): a verdict that
cannot be recorded with a usable signing key prints ``halt-uncertainty`` /
``counter_inconsistent``, exit 1, and writes nothing; and once the chain holds an entry the
trust store rejects, every verdict halts ``counter_inconsistent`` (SPEC §4 row 1).
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

from tests.batteries.common import iso, sized, summary
from tests.conftest import Result, clean_env, run_process

SEED = 1_2_0_0
DOCUMENTED = frozenset({0, 1, 2, 65, 74, 75, 78})
SEQUENCES = sized(4, 30)
SEQUENCE_STEPS = sized(25, 60)
PROCESS_CHECKS = sized(4, 16)
T0 = dt.datetime(2026, 6, 1, 12, 0, 0, tzinfo=dt.UTC)
ADMITTED = {"allow", "warn-90"}
BASE_ENV = {"LEDGER_BILLING_STALE_HALT_PCT": "100"}


def ts(seconds: float) -> str:
    return iso(T0 + dt.timedelta(seconds=seconds))


def shift(text: str, micros: int) -> str:
    return iso(dt.datetime.fromisoformat(text) + dt.timedelta(microseconds=micros))


@dataclass
class Tally:
    passed: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    changes: int = 0
    checks: int = 0
    broken: int = 0
    unusable: int = 0
    processes: int = 0

    def add(self, area: str, ok: bool, detail: str) -> None:
        if ok:
            self.passed[area] += 1
        else:
            self.failed[area] += 1
            self.failures.append(f"[{area}] {detail}")


def parse(result: Result) -> dict[str, Any]:
    try:
        value = json.loads(result.stdout)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Home:
    """One home, the commands run on it, and an independent model of its trust store."""

    def __init__(self, run: Any, tally: Tally, path: Path, area: str) -> None:
        self.run_inproc = run
        self.tally = tally
        self.path = path
        self.area = area
        self.seconds = 0.0
        self.public: dict[str, str] = {}  # every key's own public key, as first seen

    @property
    def trust_path(self) -> Path:
        return self.path / "trust.json"

    def now(self) -> str:
        return ts(self.seconds)

    def cli(self, *args: str, step: float = 1, process: bool = False) -> Result:
        self.seconds += step
        env = {**BASE_ENV, "LEDGER_NOW": self.now()}
        argv = ["--home", str(self.path), *args]
        if process:
            result = run_process(argv, env=clean_env(**env), timeout=120)
            self.tally.processes += 1
        else:
            try:
                result = self.run_inproc(argv, env=env)
            except BaseException as exc:  # an exception escaping main() is a traceback
                result = Result(70, "", f"Traceback (escaped main): {type(exc).__name__}: {exc}")
        bad = (
            "Traceback" in result.stdout + result.stderr
            or result.code not in DOCUMENTED
            or "internal error" in result.stderr.lower()
        )
        self.tally.add(
            "contract",
            not bad,
            f"{args} at {self.now()}: -> {result.code} {result.stderr[-200:]!r}",
        )
        self.learn_keys()
        return result

    def learn_keys(self) -> None:
        for key in self.trust().get("keys", []):
            self.public.setdefault(key["key_id"], key["public_key"])

    def trust(self) -> dict[str, Any]:
        try:
            document = json.loads(self.trust_path.read_text())
        except (OSError, ValueError):
            return {}
        return document if isinstance(document, dict) else {}

    def write_trust(self, document: dict[str, Any]) -> None:
        self.trust_path.write_text(json.dumps(document, indent=1))

    def keys(self) -> list[dict[str, Any]]:
        return list(self.trust().get("keys", []))

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.path / "events.jsonl").read_bytes().splitlines()]

    # --- the model -------------------------------------------------------------------

    def model_broken_line(self) -> int | None:
        """The first line the trust store does not accept, by the contract's rules."""
        trust = self.trust()
        keys = {key["key_id"]: key for key in trust.get("keys", [])}
        revocations = trust.get("revocations", [])
        for number, entry in enumerate(self.lines(), 1):
            key_id, moment = str(entry.get("signing_key_id")), entry["ts_utc"]
            key = keys.get(key_id)
            if key is None or key["public_key"] != self.public.get(key_id):
                return number
            if any(
                r["key_id"] == key_id and (r.get("revoked_at") is None or moment >= r["revoked_at"])
                for r in revocations
            ):
                return number
            if key.get("valid_from") and moment < key["valid_from"]:
                return number
            if key.get("valid_until") and moment > key["valid_until"]:
                return number
        return None

    def writer_usable(self, moment: str) -> bool:
        """Whether the active key (the open-ended one, the newest if several) may sign now."""
        open_ended = [key for key in self.keys() if key.get("valid_until") is None]
        if not open_ended:
            return False
        active = max(open_ended, key=lambda k: (k.get("valid_from") is not None, k.get("valid_from") or ""))  # fmt: skip
        if not (self.path / "keys" / f"{active['key_id']}.key.pem").exists():
            return False
        if active.get("valid_from") and moment < active["valid_from"]:
            return False
        return not any(
            r["key_id"] == active["key_id"]
            and (r.get("revoked_at") is None or moment >= r["revoked_at"])
            for r in self.trust().get("revocations", [])
        )

    # --- the checks --------------------------------------------------------------------

    def verify(self) -> tuple[bool, int | None, Result]:
        result = self.cli("verify-chain", step=0)
        if result.code == 0 and result.stdout.startswith("OK "):
            return True, None, result
        if result.code == 1 and result.stderr.startswith("BROKEN line "):
            return False, int(result.stderr.split()[2].rstrip(":")), result
        self.tally.add(self.area, False, f"verify-chain neither OK nor BROKEN: {result}")
        return False, None, result

    def expect(self, change: str, ok: bool, what: str, result: Result | None = None) -> None:
        self.tally.checks += 1
        detail = f"{change}: {what}"
        if result is not None:
            detail += f" -> {result.code} {result.stdout[:260]!r} {result.stderr[-200:]!r}"
        self.tally.add(self.area, ok, detail)

    def check(self, change: str, *, process: bool = False) -> None:
        """After a change: verify-chain agrees with the model, and the gate with verify-chain."""
        self.tally.changes += 1
        model = self.model_broken_line()
        ok, line, verified = self.verify()
        self.expect(change, ok == (model is None) and line == model,
                    f"verify-chain agrees with the trust model (model: line {model})", verified)  # fmt: skip
        usable = self.writer_usable(ts(self.seconds + 1))
        self.tally.broken += not ok
        self.tally.unusable += ok and not usable
        for args in (["verdict", "0.01"], ["verdict", "0.01", "--provider", "openai"]):
            result = self.cli(*args, process=process and len(args) == 2)
            body = parse(result)
            if not ok:
                self.expect(change, result.code == 1 and body.get("verdict") == "halt-uncertainty"
                            and body.get("uncertainty_reason") == "counter_inconsistent",
                            f"BROKEN line {line}: {args} halts counter_inconsistent", result)  # fmt: skip
            elif usable:
                self.expect(change, result.code == 0 and body.get("verdict") in ADMITTED,
                            f"OK: {args} decides normally", result)  # fmt: skip
            else:
                self.expect(change, result.code == 1 and body.get("verdict") not in ADMITTED,
                            f"OK, no usable writer key: {args} cannot be recorded", result)  # fmt: skip
        tokens = self.cli("tokens", "check", "cv", "a1", "10")
        allowed = parse(tokens).get("allowed") is True
        if not ok:
            self.expect(change, not allowed and tokens.code != 0, f"BROKEN line {line}: tokens check refused", tokens)  # fmt: skip
        elif usable:
            self.expect(change, allowed and tokens.code == 0, "OK: tokens check allowed", tokens)
        after_ok, after_line, after = self.verify()
        self.expect(change, (after_ok, after_line) == (ok, line),
                    f"what the gate wrote verifies (before: {ok}, line {line})", after)  # fmt: skip


# --- the home ---------------------------------------------------------------------------


@dataclass
class Base:
    path: Path
    old: str
    new: str
    old_times: list[str]  # ts of the entries the old key signed, in order
    new_times: list[str]


def build_base(run: Any, tally: Tally, path: Path) -> Base:
    """Old key: a verdict, its record, a convoy, a check and its record, the rotation;
    new key: a verdict and its record."""
    home = Home(run, tally, path, "base")
    assert home.cli("init", "--daily-cap-usd", "10").code == 0
    ref = parse(home.cli("verdict", "1", "--provider", "openai", step=10))["verdict_ref"]
    home.cli("record", "0.5", "--provider", "openai", "--verdict-ref", ref)
    home.cli("tokens", "create", "cv", "--agent-max", "100000", step=9)
    check = parse(home.cli("tokens", "check", "cv", "a1", "100"))["check_ref"]
    home.cli("tokens", "record", "cv", "a1", "40", "50", "--check-ref", check)
    rotated = parse(home.cli("keys", "rotate", step=8))
    ref = parse(home.cli("verdict", "0.5", step=10))["verdict_ref"]
    home.cli("record", "0.25", "--provider", "openai", "--verdict-ref", ref)
    lines = home.lines()
    old, new = rotated["old_key_id"], rotated["new_key_id"]
    assert [line["signing_key_id"] for line in lines] == [old] * 6 + [new] * 2, lines
    return Base(
        path,
        old,
        new,
        [line["ts_utc"] for line in lines if line["signing_key_id"] == old],
        [line["ts_utc"] for line in lines if line["signing_key_id"] == new],
    )


def edit_key(home: Home, key_id: str, **fields: Any) -> None:
    document = home.trust()
    for key in document["keys"]:
        if key["key_id"] == key_id:
            key.update(fields)
    home.write_trust(document)


def remove_key(home: Home, key_id: str) -> None:
    document = home.trust()
    document["keys"] = [k for k in document["keys"] if k["key_id"] != key_id]
    home.write_trust(document)


def add_revocation(home: Home, key_id: str, revoked_at: str | None) -> None:
    document = home.trust()
    document.setdefault("revocations", []).append(
        {"key_id": key_id, "revoked_at": revoked_at, "reason": "edited by hand"}
    )
    home.write_trust(document)


def set_field(home: Home, name: str, value: Any) -> None:
    document = home.trust()
    document[name] = value
    home.write_trust(document)


NEXT_YEAR = "2027-06-01T00:00:00.000000Z"
# Each change is a list of steps: ("cli", *args), ("edit", KEY, field, TIME), ("remove", KEY),
# ("revoke", KEY, TIME), ("set", field, TIME), ("swap", KEY, KEY). KEY is "old", "new",
# "newest" (the last key in trust.json) or a literal id. TIME is None, a literal, "now+1us",
# or (which, index, micros): the index-th entry the old or new key signed, shifted.
SINGLE_CHANGES: dict[str, list[tuple[Any, ...]]] = {
    "nothing": [],
    "revoke OLD entirely": [("cli", "keys", "revoke", "old", "--reason", "compromised")],
    "revoke OLD --at its first entry": [("cli", "keys", "revoke", "old", "--at", ("old", 0, 0))],
    "revoke OLD --at its 3rd entry": [("cli", "keys", "revoke", "old", "--at", ("old", 2, 0))],
    "revoke OLD --at the rotation": [("cli", "keys", "revoke", "old", "--at", ("old", -1, 0))],
    "revoke OLD --at rotation+1us": [("cli", "keys", "revoke", "old", "--at", ("old", -1, 1))],
    "revoke OLD --at next year": [("cli", "keys", "revoke", "old", "--at", "2027-06-01T00:00:00Z")],
    "revoke OLD --at +02:00 offset": [
        ("cli", "keys", "revoke", "old", "--at", "2026-06-01T14:00:15+02:00")
    ],
    "revoke NEW (active: refused)": [("cli", "keys", "revoke", "new", "--reason", "x")],
    "revoke unknown key (refused)": [("cli", "keys", "revoke", "ffffffffffffffff")],
    "rotate": [("cli", "keys", "rotate")],
    "rotate, revoke NEW entirely": [
        ("cli", "keys", "rotate"), ("cli", "keys", "revoke", "new", "--reason", "lost")
    ],
    "rotate, revoke NEW --at now": [
        ("cli", "keys", "rotate"), ("cli", "keys", "revoke", "new", "--at", "now+1us")
    ],
    "rotate twice, revoke both old keys": [
        ("cli", "keys", "rotate"), ("cli", "keys", "rotate"),
        ("cli", "keys", "revoke", "old"), ("cli", "keys", "revoke", "new"),
    ],
    "rotate, hand: the newest key valid from next year": [
        ("cli", "keys", "rotate"), ("edit", "newest", "valid_from", NEXT_YEAR)
    ],
    "rotate, hand: revoke the newest key from now on": [
        ("cli", "keys", "rotate"), ("revoke", "newest", "now+1us")
    ],
    "hand: remove OLD": [("remove", "old")],
    "hand: remove NEW (the active key)": [("remove", "new")],
    "hand: OLD valid_until = its 3rd entry": [("edit", "old", "valid_until", ("old", 2, 0))],
    "hand: OLD valid_until = 3rd entry - 1us": [("edit", "old", "valid_until", ("old", 2, -1))],
    "hand: OLD valid_until = rotation - 1us": [("edit", "old", "valid_until", ("old", -1, -1))],
    "hand: OLD valid_from = its first entry": [("edit", "old", "valid_from", ("old", 0, 0))],
    "hand: OLD valid_from = first entry + 1us": [("edit", "old", "valid_from", ("old", 0, 1))],
    "hand: OLD valid_until = null (two open keys)": [("edit", "old", "valid_until", None)],
    "hand: NEW valid_from = its first entry + 1us": [("edit", "new", "valid_from", ("new", 0, 1))],
    "hand: NEW valid_from = null": [("edit", "new", "valid_from", None)],
    "hand: NEW valid_from = next year": [("edit", "new", "valid_from", NEXT_YEAR)],
    "hand: NEW valid_until = its last entry": [("edit", "new", "valid_until", ("new", -1, 0))],
    "hand: revoke OLD entirely": [("revoke", "old", None)],
    "hand: revoke OLD at its 4th entry": [("revoke", "old", ("old", 3, 0))],
    "hand: revoke OLD at 4th entry + 1us": [("revoke", "old", ("old", 3, 1))],
    "hand: revoke NEW at its first entry": [("revoke", "new", ("new", 0, 0))],
    "hand: revoke NEW from now on": [("revoke", "new", "now+1us")],
    "hand: revoke NEW from next year": [("revoke", "new", NEXT_YEAR)],
    "hand: revoke an unknown key": [("revoke", "ffffffffffffffff", None)],
    "hand: swap OLD's public key for NEW's": [("swap", "old", "new")],
    "hand: strict_after = before every entry": [("set", "strict_after", ts(0))],
    "hand: strict_after = next year": [("set", "strict_after", NEXT_YEAR)],
    "hand: strict_after = null": [("set", "strict_after", None)],
}  # fmt: skip


def apply_change(home: Home, base: Base, steps: list[tuple[Any, ...]]) -> None:
    def key(name: str) -> str:
        named = {"old": base.old, "new": base.new}
        return home.keys()[-1]["key_id"] if name == "newest" else named.get(name, name)

    def moment(value: Any) -> Any:
        if value == "now+1us":
            return shift(home.now(), 1)
        if isinstance(value, tuple):
            which, index, micros = value
            times = base.old_times if which == "old" else base.new_times
            return shift(times[index], micros)
        return value

    for kind, *args in steps:
        if kind == "cli":
            home.cli(*[key(a) if a in {"old", "new", "newest"} else moment(a) for a in args])
        elif kind == "edit":
            edit_key(home, key(args[0]), **{args[1]: moment(args[2])})
        elif kind == "remove":
            remove_key(home, key(args[0]))
        elif kind == "revoke":
            add_revocation(home, key(args[0]), moment(args[1]))
        elif kind == "set":
            set_field(home, args[0], moment(args[1]))
        elif kind == "swap":
            edit_key(home, key(args[0]), public_key=home.public[key(args[1])])


def single_battery(run: Any, tally: Tally, base: Base, work: Path) -> None:
    rng = random.Random(SEED)
    processes = set(rng.sample(sorted(SINGLE_CHANGES), PROCESS_CHECKS))
    for name, steps in SINGLE_CHANGES.items():
        path = work / "single"
        if path.exists():
            shutil.rmtree(path)
        shutil.copytree(base.path, path, copy_function=shutil.copy)
        home = Home(run, tally, path, "single")
        home.seconds = 200
        home.learn_keys()
        original = home.trust_path.read_bytes()
        apply_change(home, base, steps)
        home.check(name, process=name in processes)
        home.check(f"{name}; again")  # what the first check wrote is held to the same rules
        home.cli("rebuild-state")  # an operator's first move; must not clear a broken chain
        home.check(f"{name}; rebuild-state")
        if home.trust_path.read_bytes() != original:  # put the original trust store back
            home.trust_path.write_bytes(original)
            home.check(f"{name}; original trust store back")


def spec_sequence(run: Any, tally: Tally, work: Path) -> None:
    """SPEC's sequence: record 2; rotate; verdict 0.5; revoke OLD --reason compromised."""
    home = Home(run, tally, work / "spec", "spec")
    home.cli("init", "--daily-cap-usd", "10")
    home.cli("tokens", "create", "cv")
    home.check("fresh home")
    home.cli("record", "2", "--provider", "openai")
    rotated = parse(home.cli("keys", "rotate"))
    home.check("record 2; keys rotate")
    verdict = home.cli("verdict", "0.5")
    home.expect("spec", parse(verdict).get("verdict") == "allow", "verdict 0.5 after the rotation", verdict)  # fmt: skip
    revoked = home.cli("keys", "revoke", rotated.get("old_key_id", "?"), "--reason", "compromised")
    home.expect("spec", revoked.code == 0, "keys revoke OLD --reason compromised", revoked)
    ok, line, result = home.verify()
    home.expect("spec", not ok and line == 1, "verify-chain: BROKEN line 1", result)
    home.check("record 2; rotate; verdict 0.5; revoke OLD --reason compromised", process=True)


# --- seeded sequences -------------------------------------------------------------------


def random_change(home: Home, rng: random.Random, originals: list[bytes]) -> str:
    keys = home.keys()
    key_ids = [k["key_id"] for k in keys] or ["ffffffffffffffff"]
    retired = [k["key_id"] for k in keys if k.get("valid_until") is not None]
    lines = home.lines()
    moment = rng.choice(lines)["ts_utc"] if lines else home.now()
    moment = shift(moment, rng.choice([-1, 0, 0, 1]))
    which = rng.randrange(12)
    if which == 0:
        home.cli("keys", "rotate")
        originals.append(home.trust_path.read_bytes())
        return "rotate"
    if which == 1 and retired:
        key = rng.choice(retired)
        args = ["keys", "revoke", key, "--reason", "compromised"]
        if rng.random() < 0.6:
            args += ["--at", moment]
        home.cli(*args)
        return " ".join(args[:3] + args[5:])
    if which == 2:
        key = rng.choice(key_ids)
        remove_key(home, key)
        return f"hand: remove {key}"
    if which == 3:
        key = rng.choice(key_ids)
        edit_key(home, key, valid_until=moment)
        return f"hand: {key} valid_until {moment}"
    if which == 4:
        key = rng.choice(key_ids)
        edit_key(home, key, valid_from=moment)
        return f"hand: {key} valid_from {moment}"
    if which == 5:
        key = rng.choice(key_ids)
        at = rng.choice([None, moment, shift(home.now(), 1)])
        add_revocation(home, key, at)
        return f"hand: revoke {key} at {at}"
    if which == 6:
        value = rng.choice([None, ts(0), moment, "2027-06-01T00:00:00.000000Z"])
        set_field(home, "strict_after", value)
        return f"hand: strict_after {value}"
    if which in {7, 8}:  # back to a trust store the CLI wrote
        home.trust_path.write_bytes(rng.choice(originals[-2:]))
        return "trust store put back"
    home.cli("record", f"0.0{rng.randint(1, 9)}", "--provider", "openai")
    return "record"


def sequence_battery(run: Any, tally: Tally, base: Base, work: Path) -> None:
    rng = random.Random(SEED + 1)
    for number in range(SEQUENCES):
        path = work / f"sequence-{number}"
        shutil.copytree(base.path, path, copy_function=shutil.copy)
        home = Home(run, tally, path, "sequences")
        home.seconds = 200
        home.learn_keys()
        originals = [home.trust_path.read_bytes()]
        done = []
        for _ in range(SEQUENCE_STEPS):
            done.append(random_change(home, rng, originals))
            home.check(" / ".join(done[-4:]))
        shutil.rmtree(path)


@pytest.mark.timeout(sized(600, 3600))
def test_trust_battery(run_inproc, tmp_path, capsys):
    tally = Tally()
    work = tmp_path / "work"
    work.mkdir()
    base = build_base(run_inproc, tally, tmp_path / "base")
    spec_sequence(run_inproc, tally, work)
    single_battery(run_inproc, tally, base, work)
    sequence_battery(run_inproc, tally, base, work)

    passed, failed = sum(tally.passed.values()), sum(tally.failed.values())
    areas = sorted(set(tally.passed) | set(tally.failed))
    figures = ", ".join(f"{a} {tally.passed[a]}/{tally.passed[a] + tally.failed[a]}" for a in areas)
    summary(
        capsys, "trust", passed, failed,
        f"{tally.checks} change x check cases after {tally.changes} changes; {figures}; "
        f"verify-chain BROKEN after {tally.broken}, OK without a usable writer key after "
        f"{tally.unusable}; real processes {tally.processes}",
    )  # fmt: skip
    assert not tally.failures, "\n".join(tally.failures[:40])
