"""Battery: tamper. Every kind of damage to a real, mixed chain is detected at the right line.

A home is built through the real CLI (verdicts, records, reconciles with the shipped
file observer, agent budgets, a key rotation, a snapshot, a rebuild-state, a final
checkpoint covering every entry). Then each mutation kind is applied at many seeded
random positions, and the damaged log is verified in-process exactly as
``ledger verify-chain`` verifies the home's chain (``verify_store`` over a
``ChainFile`` with the trust store and the newest checkpoint); a sample goes through
the CLI, in-process and as real processes. For each mutation the expected line is
computed from the damage alone (never from the verifier):

* edit any field (envelope or payload; set, add, remove) or flip any byte → that line;
* delete line k → k (the last line's loss shows through the checkpoint);
* insert a copy of line j as line k → k, or k+1 when it lands just before j;
* insert a foreign entry as line k → k (untrusted key, wrong link, key not valid at
  its time), or k+1 (trusted key, linked: the next link breaks);
* swap lines i < j → i; duplicate line j → j+1; a ``[...]`` marker as line k → k;
* truncate to m lines (whole or torn) → m+1; truncate to m and re-append r entries
  with the valid key → 1 (m = 0: another chain), m+r+1 (still short), else the
  checkpoint's count C;
* strip the signature at/after ``strict_after`` (or under ``--strict``) → that line;
* swap the key id, revoke a key, or use a key outside its validity → the first line
  signed by that key that the change affects.

Controls (a marker with ``--allow-markers``, an unsigned entry before
``strict_after``, a valid append after the checkpoint, a re-signature by another key
valid at that time) must verify: no false alarm.

The second battery, ``tamper-gate``, checks what SPEC §4 row 1 asks of the gate: a
timestamp more than ``clock_tolerance_seconds`` earlier than the entry before it
(re-signed with the valid key: verify-chain need not see it), and a chain cut below
its checkpoint or deleted (verify-chain reports it; the gate must see it too, also
when the derived state is gone and is "rebuilt from the verified chain") must halt
every verdict with ``counter_inconsistent`` until an operator acts.
"""

import datetime as dt
import json
import random
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ledger.core.canonical import canonical_bytes
from ledger.core.checkpoint import Checkpoint
from ledger.core.envelope import GENESIS, parse_line, render_line
from ledger.core.seal import seal
from ledger.core.signing import Signer
from ledger.core.timefmt import format_ts, parse_ts
from ledger.core.trust import Revocation, TrustStore, trust_document
from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.checkpointfiles import CheckpointDir
from ledger.edges.files.keyfiles import KeyDir
from ledger.edges.schemas import load_schema
from ledger.services.chain.verify import verify_store
from tests.batteries.common import build_mixed_home, iso, pct, sized, summary
from tests.conftest import clean_env, run_process
from tests.helpers.chains import signer as fixed_signer

SEED = 20260301
PER_KIND = sized(300, 1500)
CLI_EVERY = sized(20, 40)  # every Nth case also through the in-process CLI
PROCESS_SAMPLE = sized(14, 40)  # cases through `python -m ledger` as real processes
STRANGER = fixed_signer(77)
RESETS = frozenset({"ledger.state_rebuilt", "ledger.recovered"})
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@dataclass
class Case:
    """One damaged log and the line verify-chain must name (``None``: must verify)."""

    kind: str
    lines: list[bytes]
    expected: int | None
    trust: TrustStore
    strict: bool = False
    allow_markers: bool = False
    note: str = ""


@dataclass
class Chain:
    """The valid chain under test and what the mutations need to know of it."""

    lines: list[bytes]
    trust: TrustStore
    checkpoint: Checkpoint
    checkpoint_path: Path
    signers: dict[str, Signer]
    rotated_at: str
    entries: list[dict[str, Any]] = field(default_factory=list)  # full entries, signature included

    @property
    def n(self) -> int:
        return len(self.lines)

    def ts(self, line: int) -> str:
        return str(self.entries[line - 1]["ts_utc"])

    def kid(self, line: int) -> str:
        return str(self.entries[line - 1]["signing_key_id"])

    def hash_of(self, line: int) -> str:
        return parse_line(self.lines[line - 1].rstrip(b"\n")).entry_hash

    def covers(self, key_id: str, ts: str) -> bool:
        trusted = self.trust.key(key_id)
        return trusted is not None and trusted.covers(parse_ts(ts))

    def key_covering(self, ts: str) -> Signer:
        for key_id, key in self.signers.items():
            if self.covers(key_id, ts):
                return key
        raise AssertionError(f"no key covers {ts}")


# --- rendering ------------------------------------------------------------------------------


def unsigned_part(full: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in full.items() if k not in {"signature", "signing_key_id"}}


def sign_line(unsigned: dict[str, Any], key: Signer) -> bytes:
    """Our layout, signed by ``key``."""
    preimage = canonical_bytes(unsigned)
    return render_line(preimage, key.sign_b64(preimage), key.key_id)


def render(full: dict[str, Any], rng: random.Random) -> bytes:
    """A (possibly damaged) entry as a line: our layout when it has one, else plain JSON."""
    sig, kid = full.get("signature"), full.get("signing_key_id")
    if isinstance(sig, str) and isinstance(kid, str) and rng.random() < 0.7:
        try:
            preimage = canonical_bytes(unsigned_part(full))
        except Exception:
            preimage = b""
        if preimage.startswith(b"{"):
            tail = json.dumps({"signature": sig, "signing_key_id": kid}, separators=(",", ":"))
            return preimage[:-1] + b"," + tail[1:].encode("utf-8") + b"\n"
    return json.dumps(full, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def foreign_entry(chain: Chain, ts: str, prev: str, key: Signer, index: int) -> bytes:
    """A validly signed ``budget.record_call`` at ``ts`` linked to ``prev``."""
    payload = {
        "provider": "openai",
        "actual_micros": 1_234 + index,
        "utc_day": ts[:10],
        "verdict_ref": None,
        "settled": False,
        "cycle_id": f"forged-{index}",
    }
    sealed = seal(
        "budget.record_call",
        payload,
        load_schema("budget.record_call"),
        moment=parse_ts(ts),
        prev_hash=None if prev == GENESIS else prev,
        signer=key,
    )
    return sealed.line


# --- value mutation -------------------------------------------------------------------------


def mutate_text(text: str, rng: random.Random) -> str:
    if not text:
        return "x"
    pos = rng.randrange(len(text))
    alphabet = B64 if rng.random() < 0.5 else "0123456789abcdef-:.TZx"
    new = text
    while new == text:
        new = text[:pos] + rng.choice(alphabet) + text[pos + 1 :]
    return new


def mutate_value(value: Any, rng: random.Random) -> Any:
    """A different value of a similar kind (never equal, never a float)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, -1, 7, 1_000_000, -(2 * value) - 1])
    if isinstance(value, str):
        return mutate_text(value, rng)
    if value is None:
        return rng.choice(["x", 0, [], {}, True])
    if isinstance(value, list):
        return [*value, "x"] if rng.random() < 0.5 or not value else value[:-1]
    if isinstance(value, dict):
        if value and rng.random() < 0.7:
            key = rng.choice(sorted(value))
            return {**value, key: mutate_value(value[key], rng)}
        return {**value, "x_extra": rng.choice([0, "x", None])}
    raise AssertionError(type(value))


# --- mutation kinds -------------------------------------------------------------------------

Maker = Callable[[Chain, random.Random, int], Case]


def edit_field(chain: Chain, rng: random.Random, _index: int) -> Case:
    i = rng.randint(1, chain.n)
    full = json.loads(json.dumps(chain.entries[i - 1]))
    payload_keys = sorted(full["payload"])
    op = rng.choice(["set", "set", "set", "remove", "add"])
    if op == "add":
        if rng.random() < 0.5:
            full["extra_field"] = "x"
        else:
            full["payload"]["x_added"] = rng.choice([0, "x", None, True])
        note = "add"
    elif op == "remove":
        # Removing signature fields is the strip-signature kind (allowed before strict_after).
        target = rng.choice(
            ["schema_version", "primitive_id", "event_type", "ts_utc", "prev_hash", "payload",
             "redaction_applied", *(["payload." + k for k in payload_keys])]
        )  # fmt: skip
        if target.startswith("payload."):
            del full["payload"][target.split(".", 1)[1]]
        else:
            del full[target]
        note = f"remove {target}"
    else:
        target = rng.choice(
            ["schema_version", "primitive_id", "event_type", "ts_utc", "prev_hash", "payload",
             "redaction_applied", "signature", "signing_key_id",
             *(["payload." + k for k in payload_keys] * 2)]
        )  # fmt: skip
        if target.startswith("payload."):
            key = target.split(".", 1)[1]
            full["payload"][key] = mutate_value(full["payload"][key], rng)
        else:
            full[target] = mutate_value(full[target], rng)
        note = f"set {target}"
    lines = list(chain.lines)
    lines[i - 1] = render(full, rng)
    assert lines[i - 1] != chain.lines[i - 1]
    return Case("edit-field", lines, i, chain.trust, note=note)


def byte_flip(chain: Chain, rng: random.Random, _index: int) -> Case:
    blob = bytearray(b"".join(chain.lines))
    offset = rng.randrange(len(blob))
    old = blob[offset]
    new = old ^ (1 << rng.randrange(8)) if rng.random() < 0.5 else rng.randrange(256)
    if new == old:
        new = old ^ 1
    blob[offset] = new
    line = blob.count(b"\n", 0, offset) + 1
    return Case("byte-flip", split_lines(bytes(blob)), line, chain.trust, note=f"@{offset}")


def delete(chain: Chain, rng: random.Random, _index: int) -> Case:
    k = rng.randint(1, chain.n)
    return Case("delete", chain.lines[: k - 1] + chain.lines[k:], k, chain.trust)


def insert_copy(chain: Chain, rng: random.Random, _index: int) -> Case:
    j = rng.randint(1, chain.n)
    k = rng.randint(1, chain.n + 1)
    lines = [*chain.lines[: k - 1], chain.lines[j - 1], *chain.lines[k - 1 :]]
    return Case("insert-copy", lines, k + 1 if k == j else k, chain.trust, note=f"{j}->{k}")


def insert_foreign(chain: Chain, rng: random.Random, index: int) -> Case:
    k = rng.randint(1, chain.n + 1)
    ts = chain.ts(max(1, k - 1))
    prev = GENESIS if k == 1 else chain.hash_of(k - 1)
    variant = rng.choice(["stranger", "valid", "valid", "unlinked", "invalid-window"])
    expected: int | None = k
    if variant == "stranger":
        line = foreign_entry(chain, ts, prev, STRANGER, index)
    elif variant == "unlinked":
        line = foreign_entry(chain, ts, "ab" * 32, chain.key_covering(ts), index)
    elif variant == "invalid-window":
        outside = [key_id for key_id in chain.signers if not chain.covers(key_id, ts)]
        if not outside:  # both keys cover this moment (the rotation instant): use a stranger
            line = foreign_entry(chain, ts, prev, STRANGER, index)
        else:
            line = foreign_entry(chain, ts, prev, chain.signers[min(outside)], index)
    else:
        line = foreign_entry(chain, ts, prev, chain.key_covering(ts), index)
        expected = k + 1 if k <= chain.n else None  # a valid append at the end is legitimate
    lines = [*chain.lines[: k - 1], line, *chain.lines[k - 1 :]]
    return Case("insert-foreign", lines, expected, chain.trust, note=f"{variant}@{k}")


def swap(chain: Chain, rng: random.Random, _index: int) -> Case:
    i, j = sorted(rng.sample(range(1, chain.n + 1), 2))
    lines = list(chain.lines)
    lines[i - 1], lines[j - 1] = lines[j - 1], lines[i - 1]
    return Case("swap", lines, i, chain.trust, note=f"{i}<->{j}")


def duplicate(chain: Chain, rng: random.Random, _index: int) -> Case:
    j = rng.randint(1, chain.n)
    lines = [*chain.lines[:j], chain.lines[j - 1], *chain.lines[j:]]
    return Case("duplicate", lines, j + 1, chain.trust)


def truncate(chain: Chain, rng: random.Random, _index: int) -> Case:
    m = rng.randint(0, chain.n - 1)
    lines = list(chain.lines[:m])
    note = f"keep {m}"
    if rng.random() < 0.4:  # a torn line after the kept ones
        nxt = chain.lines[m]
        lines.append(nxt[: rng.randint(1, len(nxt) - 1)])
        note += " + torn"
    return Case("truncate", lines, m + 1, chain.trust, note=note)


def truncate_reappend(chain: Chain, rng: random.Random, index: int) -> Case:
    c = chain.checkpoint.entries
    m = rng.randint(0, chain.n - 1)
    r = rng.randint(1, 6)
    lines = list(chain.lines[:m])
    prev = chain.hash_of(m) if m else GENESIS
    moment = parse_ts(chain.ts(chain.n)) + dt.timedelta(seconds=30)
    key = chain.key_covering(format_ts(moment))
    for offset in range(r):
        ts = format_ts(moment + dt.timedelta(seconds=offset))
        line = foreign_entry(chain, ts, prev, key, 10_000 * index + offset)
        lines.append(line)
        prev = parse_line(line.rstrip(b"\n")).entry_hash
    if m == 0:
        expected = 1  # another chain's identity
    elif m + r < c:
        expected = m + r + 1  # still short of the checkpoint
    else:
        expected = c  # entry C differs from the checkpoint's head
    return Case("truncate-reappend", lines, expected, chain.trust, note=f"m={m} r={r}")


def strip_signature(chain: Chain, rng: random.Random, _index: int) -> Case:
    s = rng.randint(1, chain.n)
    strict_after = chain.ts(s)
    store = TrustStore(chain.trust.keys, chain.trust.revocations, parse_ts(strict_after))
    strict = rng.random() < 0.2
    i = rng.randint(1, chain.n) if strict else rng.randint(s, chain.n)
    full = dict(chain.entries[i - 1])
    variant = rng.choice(["both", "both", "signature", "key-id", "nulls"])
    if variant == "both":
        line = canonical_bytes(unsigned_part(full)) + b"\n"
    else:
        if variant == "signature":
            del full["signature"]
        elif variant == "key-id":
            del full["signing_key_id"]
        else:
            full["signature"] = full["signing_key_id"] = None
        line = json.dumps(full, separators=(",", ":")).encode() + b"\n"
    lines = list(chain.lines)
    lines[i - 1] = line
    expected: int | None = i if strict or chain.ts(i) >= strict_after else None
    return Case("strip-signature", lines, expected, store, strict=strict, note=f"{variant}@{i}")


def swap_key_id(chain: Chain, rng: random.Random, _index: int) -> Case:
    i = rng.randint(1, chain.n)
    full = dict(chain.entries[i - 1])
    others = [k for k in chain.signers if k != full["signing_key_id"]] + [STRANGER.key_id]
    full["signing_key_id"] = rng.choice(others)
    lines = list(chain.lines)
    lines[i - 1] = render(full, rng)
    return Case("swap-key-id", lines, i, chain.trust, note=f"@{i}")


def revoked_key(chain: Chain, rng: random.Random, _index: int) -> Case:
    key_id = rng.choice(sorted(chain.signers))
    signed = [line for line in range(1, chain.n + 1) if chain.kid(line) == key_id]
    at = None if rng.random() < 0.2 else chain.ts(rng.choice(signed))
    revocation = Revocation(key_id, None if at is None else parse_ts(at), "battery")
    store = TrustStore(chain.trust.keys, (revocation,), chain.trust.strict_after)
    expected = min(line for line in signed if at is None or chain.ts(line) >= at)
    return Case("revoked-key", list(chain.lines), expected, store, note=f"{key_id[:6]} at {at}")


def outside_validity(chain: Chain, rng: random.Random, _index: int) -> Case:
    if rng.random() < 0.6:  # re-signed by the other home key (a holder of the rotated-out key)
        i = rng.randint(1, chain.n)
        other = next(key for key_id, key in chain.signers.items() if key_id != chain.kid(i))
        lines = list(chain.lines)
        lines[i - 1] = sign_line(unsigned_part(chain.entries[i - 1]), other)
        covers = chain.covers(other.key_id, chain.ts(i))
        return Case(
            "outside-validity", lines, None if covers else i, chain.trust, note=f"resign@{i}"
        )
    # or the trust store ends the first key's window before some of its entries
    first_key = chain.kid(1)
    signed = [line for line in range(1, chain.n + 1) if chain.kid(line) == first_key]
    x = rng.choice(signed)
    until = parse_ts(chain.ts(x)) - dt.timedelta(microseconds=1)
    old = chain.trust.key(first_key)
    assert old is not None
    store = chain.trust.with_key(old._replace(valid_until=until))
    expected = min(line for line in signed if chain.ts(line) > format_ts(until))
    return Case("outside-validity", list(chain.lines), expected, store, note=f"window<{x}")


def marker(chain: Chain, rng: random.Random, index: int) -> Case:
    k = rng.randint(1, chain.n + 1)
    text = rng.choice(
        [b"[marker]", b"[2026-03-01 legacy rotation]", b'["a","b"]', b"[" + b"x" * 300]
    )
    lines = [*chain.lines[: k - 1], text + b"\n", *chain.lines[k - 1 :]]
    if index % 5 == 0:  # control: skipped with --allow-markers
        return Case("marker", lines, None, chain.trust, allow_markers=True, note=f"allowed@{k}")
    return Case("marker", lines, k, chain.trust, note=f"@{k}")


KINDS: dict[str, Maker] = {
    "edit-field": edit_field,
    "byte-flip": byte_flip,
    "delete": delete,
    "insert-copy": insert_copy,
    "insert-foreign": insert_foreign,
    "swap": swap,
    "duplicate": duplicate,
    "truncate": truncate,
    "truncate-reappend": truncate_reappend,
    "strip-signature": strip_signature,
    "swap-key-id": swap_key_id,
    "revoked-key": revoked_key,
    "outside-validity": outside_validity,
    "marker": marker,
}


def split_lines(data: bytes) -> list[bytes]:
    """Lines as a file reader sees them: split after each ``\\n``."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


# --- the chain ----------------------------------------------------------------------------


def load_chain(home: Path) -> Chain:
    keys = KeyDir(home)
    trust = keys.load_trust()
    newest = CheckpointDir(home / "checkpoints").newest()
    assert newest is not None
    lines = (home / "events.jsonl").read_bytes().splitlines(keepends=True)
    entries = []
    for raw in lines:
        parsed = parse_line(raw.rstrip(b"\n"))
        entries.append(
            {**parsed.entry, "signature": parsed.signature, "signing_key_id": parsed.signing_key_id}
        )
    signers = {key.key_id: keys.load_signer(key.key_id) for key in trust.keys}
    rotated = next(e["ts_utc"] for e in entries if e["event_type"] == "ledger.key_rotated")
    return Chain(lines, trust, newest[1], newest[0], signers, rotated, entries)


@pytest.fixture
def mixed(run_inproc, tmp_path):
    return build_mixed_home(run_inproc, tmp_path / "home", tmp_path / "work")


def _verify_cli_args(case: Case, log: Path, trust_file: Path, checkpoint: Path) -> list[str]:
    trust_file.write_bytes(canonical_bytes(trust_document(case.trust)) + b"\n")
    args = [
        "verify-chain",
        str(log),
        "--trust-store",
        str(trust_file),
        "--checkpoint",
        str(checkpoint),
    ]
    if case.strict:
        args.append("--strict")
    if case.allow_markers:
        args.append("--allow-markers")
    return args


def _cli_matches(code: int, stdout: str, stderr: str, case: Case, entries: int | None) -> bool:
    if "Traceback" in stdout + stderr:
        return False
    if case.expected is None:
        return code == 0 and stdout == f"OK {entries} entries\n" and stderr == ""
    lines = stderr.splitlines()
    return (
        code == 1
        and stdout == ""
        and len(lines) == 1
        and lines[0].startswith(f"BROKEN line {case.expected}: ")
    )


@pytest.mark.timeout(sized(600, 3600))
def test_tamper_battery(mixed, run_inproc, tmp_path, capsys):
    chain = load_chain(mixed.home)
    assert chain.n >= 40, chain.n
    assert chain.checkpoint.entries == chain.n
    assert len(chain.signers) == 2
    # the untouched chain verifies, in-process and through the CLI
    untouched = verify_store(ChainFile(mixed.chain), chain.trust, chain.checkpoint)
    assert untouched.ok, untouched
    home_check = run_inproc(["--home", str(mixed.home), "verify-chain"])
    assert (home_check.code, home_check.stdout) == (0, f"OK {chain.n} entries\n"), home_check
    rng = random.Random(SEED)
    cases: list[Case] = []
    for kind, maker in KINDS.items():
        for index in range(PER_KIND):
            case = maker(chain, rng, index)
            assert case.kind == kind
            cases.append(case)

    log = tmp_path / "damaged.jsonl"
    trust_file = tmp_path / "trust.json"
    failures: list[str] = []
    by_kind: Counter[str] = Counter()
    detected = right_line = detectable = controls = false_alarms = 0
    cli_checked = cli_ok = 0
    process_picks = set(rng.sample(range(len(cases)), PROCESS_SAMPLE))
    process_checked = process_ok = 0
    for number, case in enumerate(cases):
        log.write_bytes(b"".join(case.lines))
        outcome = verify_store(
            ChainFile(log), case.trust, chain.checkpoint,
            strict=case.strict, allow_markers=case.allow_markers,
        )  # fmt: skip
        good = True
        if case.expected is None:
            controls += 1
            if not outcome.ok:
                false_alarms += 1
                good = False
        else:
            detectable += 1
            if not outcome.ok:
                detected += 1
                if outcome.line == case.expected:
                    right_line += 1
                else:
                    good = False
            else:
                good = False
        entries = outcome.entries if outcome.ok else None
        if number % CLI_EVERY == 0:
            args = _verify_cli_args(case, log, trust_file, chain.checkpoint_path)
            result = run_inproc(["--home", str(tmp_path / "nohome"), *args])
            cli_checked += 1
            if _cli_matches(result.code, result.stdout, result.stderr, case, entries):
                cli_ok += 1
            else:
                good = False
                failures.append(f"cli {case.kind} {case.note}: {result}")
        if number in process_picks:
            args = _verify_cli_args(case, log, trust_file, chain.checkpoint_path)
            proc = run_process(["--home", str(tmp_path / "nohome"), *args], env=clean_env())
            process_checked += 1
            if _cli_matches(proc.code, proc.stdout, proc.stderr, case, entries):
                process_ok += 1
            else:
                good = False
                failures.append(f"process {case.kind} {case.note}: {proc}")
        if not good:
            by_kind[case.kind] += 1
            failures.append(
                f"{case.kind} {case.note}: expected {case.expected}, got "
                f"ok={outcome.ok} line={outcome.line} reason={outcome.reason}"
            )
    passed = len(cases) - sum(by_kind.values())
    summary(
        capsys, "tamper", passed, sum(by_kind.values()),
        f"detection {pct(detected, detectable)}, right line {pct(right_line, detectable)}, "
        f"{len(KINDS)} kinds x {PER_KIND}, {chain.n}-entry chain; "
        f"controls {controls} with {false_alarms} false alarms; "
        f"CLI in-process {cli_ok}/{cli_checked}, real processes {process_ok}/{process_checked}",
    )  # fmt: skip
    assert not failures, f"{dict(by_kind)}\n" + "\n".join(failures[:20])
    assert detected == detectable
    assert right_line == detectable


# --- tamper-gate ------------------------------------------------------------------------------


def _verdict(run, home: Path, now: dt.datetime) -> tuple[int, str | None]:
    result = run(
        ["--home", str(home), "verdict", "1"],
        env={"LEDGER_NOW": iso(now), "LEDGER_BILLING_STALE_HALT_PCT": "100"},
    )
    assert "Traceback" not in result.stderr
    return result.code, json.loads(result.stdout)["uncertainty_reason"] if result.stdout else None


def append_signed(home: Path, chain: Chain, payload: dict[str, Any], moment: dt.datetime) -> None:
    """Append a ``budget.record_call`` sealed at ``moment``, signed by the home key valid
    then (a holder of the home's keys writing around the product's writer)."""
    path = home / "events.jsonl"
    last = path.read_bytes().splitlines(keepends=True)[-1]
    prev = parse_line(last.rstrip(b"\n")).entry_hash
    ts = format_ts(moment)
    line = seal(
        "budget.record_call", payload, load_schema("budget.record_call"),
        moment=moment, prev_hash=prev, signer=chain.key_covering(ts),
    ).line  # fmt: skip
    with path.open("ab") as handle:
        handle.write(line)


def _rewrite_from(chain: Chain, k: int, new_ts: str) -> list[bytes]:
    """Line k backdated to ``new_ts`` and every later line re-linked and re-signed, each
    by the home key valid at its time (a forger holding the home's keys)."""
    lines = list(chain.lines[: k - 1])
    prev = chain.hash_of(k - 1) if k > 1 else GENESIS
    for line in range(k, chain.n + 1):
        unsigned = unsigned_part(chain.entries[line - 1])
        unsigned["prev_hash"] = prev
        if line == k:
            unsigned["ts_utc"] = new_ts
        key = chain.key_covering(unsigned["ts_utc"])
        raw = sign_line(unsigned, key)
        lines.append(raw)
        prev = parse_line(raw.rstrip(b"\n")).entry_hash
    return lines


@pytest.mark.timeout(sized(300, 1800))
def test_tamper_gate_battery(mixed, run_inproc, tmp_path, capsys):
    """SPEC §4 row 1 at the gate: a backdated entry (verify-chain may accept it) and a chain
    cut below its checkpoint (or deleted) both halt `counter_inconsistent`; a backdated
    entry's halt survives the loss of derived state and is cleared by `rebuild-state`."""
    chain = load_chain(mixed.home)
    tolerance = 60
    now = parse_ts(chain.ts(chain.n)) + dt.timedelta(seconds=30)
    rng = random.Random(SEED + 1)
    results: Counter[str] = Counter()
    failures: list[str] = []
    verify_accepts = 0

    def copy(name: str) -> Path:
        target: Path = tmp_path / name
        shutil.copytree(mixed.home, target)
        return target

    def expect(label: str, ok: bool, detail: object) -> None:
        results[label + (" ok" if ok else " FAIL")] += 1
        if not ok:
            failures.append(f"{label}: {detail}")

    # 1. a backdated entry appended by a holder of the valid key
    backsteps = [tolerance + 1, 2 * tolerance, 3600, 86_400]
    for number, backstep in enumerate(backsteps * sized(2, 5)):
        home = copy(f"backdated-{number}")
        head_ts = parse_ts(chain.ts(chain.n))
        moment = head_ts - dt.timedelta(seconds=backstep)
        payload = {
            "provider": rng.choice(["openai", "anthropic"]),
            "actual_micros": rng.randint(1, 3_000_000),
            # The record's own day: a day that disagrees with its ts_utc is a
            # different fault (an entry that cannot be folded), tested elsewhere.
            "utc_day": moment.date().isoformat(),
            "verdict_ref": None,
            "settled": False,
            "cycle_id": f"backdated-{number}",
        }
        append_signed(home, chain, payload, moment)
        verify = run_inproc(["--home", str(home), "verify-chain"])
        verify_accepts += verify.code == 0
        code, reason = _verdict(run_inproc, home, now)
        expect(
            "backdated halts",
            (code, reason) == (1, "counter_inconsistent"),
            (backstep, code, reason),
        )
        (home / "state" / "derived.json").unlink(missing_ok=True)
        code, reason = _verdict(run_inproc, home, now)
        expect(
            "backdated halts without derived state",
            (code, reason) == (1, "counter_inconsistent"),
            (backstep, code, reason),
        )
        rebuilt = run_inproc(["--home", str(home), "rebuild-state"], env={"LEDGER_NOW": iso(now)})
        code, reason = _verdict(run_inproc, home, now + dt.timedelta(seconds=1))
        expect("rebuild-state clears it", rebuilt.code == 0 and code == 0, (rebuilt, code, reason))

    # control: a step back within clock_tolerance_seconds is not a halt
    for number in range(sized(2, 4)):
        home = copy(f"within-{number}")
        head_ts = parse_ts(chain.ts(chain.n))
        payload = {
            "provider": "openai", "actual_micros": 10, "utc_day": chain.ts(chain.n)[:10],
            "verdict_ref": None, "settled": False, "cycle_id": f"within-{number}",
        }  # fmt: skip
        append_signed(home, chain, payload, head_ts - dt.timedelta(seconds=tolerance - 1 - number))
        code, reason = _verdict(run_inproc, home, now)
        expect("within tolerance admits", code == 0, (code, reason))

    # 2. an entry in the middle backdated and the rest re-signed (derived state lost)
    # (after the chain's last operator reset: rebuild-state and recover clear the flags of
    # the entries before them, as README says)
    resets = [i for i in range(1, chain.n + 1) if chain.entries[i - 1]["event_type"] in RESETS]
    first_k = max(2, max(resets, default=0) + 1)
    assert first_k < chain.n - 5, (first_k, chain.n)
    for number in range(sized(6, 20)):
        k = rng.randint(first_k, chain.n)
        backstep = rng.choice([tolerance + 1, 3600])
        new_ts = format_ts(parse_ts(chain.ts(k - 1)) - dt.timedelta(seconds=backstep))
        home = copy(f"rewritten-{number}")
        (home / "events.jsonl").write_bytes(b"".join(_rewrite_from(chain, k, new_ts)))
        (home / "state" / "derived.json").unlink(missing_ok=True)
        code, reason = _verdict(run_inproc, home, now)
        expect(
            "mid-chain backdate halts",
            (code, reason) == (1, "counter_inconsistent"),
            (k, code, reason),
        )
        verify = run_inproc(["--home", str(home), "verify-chain"])
        expect(
            "mid-chain rewrite fails verify-chain at the checkpoint's count",
            verify.code == 1 and verify.stderr.startswith(f"BROKEN line {chain.n}: "),
            (k, verify),
        )

    # 3. cut below the checkpoint: with derived state (mismatch) and without (rebuilt)
    for number in range(sized(6, 20)):
        m = rng.randint(1, chain.n - 1)
        for lose_state in (False, True):
            home = copy(f"cut-{number}-{int(lose_state)}")
            (home / "events.jsonl").write_bytes(b"".join(chain.lines[:m]))
            if lose_state:
                (home / "state" / "derived.json").unlink(missing_ok=True)
            verify = run_inproc(["--home", str(home), "verify-chain"])
            assert verify.stderr.startswith(f"BROKEN line {m + 1}: "), verify
            code, reason = _verdict(run_inproc, home, now)
            label = "cut chain halts" + (" without derived state" if lose_state else "")
            expect(label, (code, reason) == (1, "counter_inconsistent"), (m, code, reason))

    # 4. the whole chain deleted (the home's checkpoints still prove it existed)
    for lose_state in (False, True):
        home = copy(f"deleted-{int(lose_state)}")
        (home / "events.jsonl").unlink()
        if lose_state:
            (home / "state" / "derived.json").unlink(missing_ok=True)
        code, reason = _verdict(run_inproc, home, now)
        label = "deleted chain halts" + (" without derived state" if lose_state else "")
        expect(label, (code, reason) == (1, "counter_inconsistent"), (code, reason))

    failed = sum(v for k, v in results.items() if k.endswith("FAIL"))
    passed = sum(results.values()) - failed
    figures = ", ".join(f"{label} {count}" for label, count in sorted(results.items()))
    total_backdated = len(backsteps) * sized(2, 5)
    summary(
        capsys, "tamper-gate", passed, failed,
        f"{figures}; verify-chain accepted {verify_accepts}/{total_backdated} "
        "tail-backdated chains (SPEC leaves time order to the gate)",
    )  # fmt: skip
    assert not failures, "\n".join(failures[:20])
