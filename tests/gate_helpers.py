"""Shared helpers for the USD gate's integration tests (verdict / record / usage).

Times are fixed with ``LEDGER_NOW``; ``at`` shifts the base time. Observers are
small Python scripts written into ``tmp_path`` that print whatever JSON document
a file beside them holds, so a test can change the provider's answer between
two commands and count how often the gate ran the observer.
"""

import contextlib
import datetime as dt
import fcntl
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

BASE = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
CAP_ENV = {"LEDGER_BILLING_STALE_HALT_PCT": "100"}


def iso(moment: dt.datetime) -> str:
    """An aware time as ``LEDGER_NOW`` text (microseconds kept)."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def at(seconds: float = 0, base: dt.datetime = BASE) -> str:
    """``base + seconds`` as ISO-8601 UTC text."""
    return iso(base + dt.timedelta(seconds=seconds))


def env_at(seconds=0, *, cap_only=True, **extra):
    """``LEDGER_NOW`` at ``BASE + seconds``; with ``cap_only`` stale billing never halts.

    (Unannotated on purpose: callers splat ``**dict[str, str]`` into ``extra``.)
    """
    env: dict[str, str] = {"LEDGER_NOW": at(seconds)}
    if cap_only:
        env.update(CAP_ENV)
    env.update(extra)
    return env


def use_observer(home: Path, argv: list[str]) -> None:
    """Set ``observer.command`` to ``argv`` in the home's ``ledger.toml`` (as ``init`` wrote it)."""
    config = home / "ledger.toml"
    text = config.read_text()
    assert "[observer]\n" in text, "the home's ledger.toml has no [observer] table"
    config.write_text(
        text.replace("[observer]\n", f"[observer]\ncommand = {json.dumps(argv)}\n", 1)
    )


def chain_path(home: Path) -> Path:
    return home / "events.jsonl"


def state_path(home: Path) -> Path:
    return home / "state" / "derived.json"


def chain_lines(home: Path) -> list[bytes]:
    """The chain's raw lines (each with its newline), from the file or the home's database."""
    config = home / "ledger.toml"
    if config.exists() and "\n[store]\n" in config.read_text():
        from ledger.runtime import Runtime

        data = Runtime(home, {}).pg_chain.read_all()
        return [] if data is None else data.splitlines(keepends=True)
    path = chain_path(home)
    if not path.exists():
        return []
    return path.read_bytes().splitlines(keepends=True)


def chain_entries(home: Path) -> list[dict[str, Any]]:
    """Every entry of the chain as a dict."""
    return [json.loads(line) for line in chain_lines(home)]


def entry_hash(line: bytes) -> str:
    """The hash the next entry links to (SPEC §2's canonical bytes)."""
    from ledger.core.envelope import parse_line

    return parse_line(line.rstrip(b"\n")).entry_hash


def events_of(home: Path, event_type: str) -> list[dict[str, Any]]:
    return [e for e in chain_entries(home) if e["event_type"] == event_type]


def home_files(home: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``home``: relative path → (content, mode).

    SQLite's ``-shm`` files are left out: every reader of a database in WAL mode
    maps that file and updates its lock slots, and it holds no data (SQLite
    rebuilds it from the WAL); the database and its WAL are compared. Each
    database's WAL is first copied into it (a PASSIVE checkpoint, which changes
    no row): a process that checkpoints on a thread of its own
    (``walcheckpoints``, started by any resident runner in this test process)
    would otherwise change the file's bytes at a moment of its choosing.
    """
    for database in home.rglob("*.sqlite3"):
        with contextlib.closing(sqlite3.connect(database)) as db:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    files = {}
    for path in sorted(home.rglob("*")):
        if path.is_file() and not path.name.endswith(".sqlite3-shm"):
            files[str(path.relative_to(home))] = (path.read_bytes(), path.stat().st_mode)
    return files


# --- observers --------------------------------------------------------------

_OBSERVER = """\
import fcntl, json, os, sys
from pathlib import Path

answer = Path({answer!r})
log = Path({log!r})
lock = Path({lock!r})
held = "lock-free"
if lock.exists():
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        held = "lock-held"
    finally:
        os.close(fd)
with log.open("a") as handle:
    handle.write(" ".join(sys.argv[1:]) + " " + held + "\\n")
document = json.loads(answer.read_text())
if "exit" in document:
    sys.exit(document["exit"])
print(json.dumps(document))
"""


class Observer:
    """A UsageObserver script whose answer a test sets with ``answer``/``fail``."""

    def __init__(self, directory: Path, home: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.answer_path = directory / "answer.json"
        self.log_path = directory / "calls.log"
        self.script = directory / "observer.py"
        source = _OBSERVER.format(
            answer=str(self.answer_path),
            log=str(self.log_path),
            lock=str(home / "events.jsonl.lock"),
        )
        self.script.write_text(f"#!{sys.executable}\n{source}")
        self.script.chmod(0o755)  # run as an executable: `<script> <provider>`
        self.fail()

    @property
    def env(self) -> dict[str, str]:
        """The ``LEDGER_OBSERVER_COMMAND`` that runs this observer."""
        return {"LEDGER_OBSERVER_COMMAND": json.dumps([str(self.script)])}

    def answer(self, usd_used: float | str, billing_ts: str, server_ts: str | None = None) -> None:
        document: dict[str, Any] = {"usd_used": usd_used, "billing_ts": billing_ts}
        if server_ts is not None:
            document["server_ts"] = server_ts
        self.answer_path.write_text(json.dumps(document))

    def fail(self, code: int = 3) -> None:
        """Exit non-zero: the gate must see the observer as unreachable."""
        self.answer_path.write_text(json.dumps({"exit": code}))

    def calls(self) -> list[str]:
        if not self.log_path.exists():
            return []
        return self.log_path.read_text().splitlines()


# --- direct chain manipulation ------------------------------------------------


def record_payload(usd_micros: int, day: str, provider: str = "openai") -> dict[str, Any]:
    """A valid ``budget.record_call`` payload."""
    return {
        "provider": provider,
        "actual_micros": usd_micros,
        "utc_day": day,
        "verdict_ref": None,
        "settled": False,
        "model_id": None,
        "cycle_id": None,
        "input_tokens": None,
        "output_tokens": None,
    }


def append_without_state(
    home: Path, env: dict[str, str], event_type: str, payload: dict[str, Any]
) -> str:
    """Append as another process might: through the writer, leaving derived state behind."""
    from ledger.runtime import Runtime
    from ledger.services.chain.writer import Writer

    sealed = Writer(Runtime(home, {**env})).append_one(event_type, payload)
    return sealed.entry_hash


def append_raw_entry(
    home: Path,
    env: dict[str, str],
    event_type: str,
    payload: dict[str, Any],
    moment: dt.datetime,
    *,
    validate: bool = True,
) -> str:
    """Sign and append an entry at an arbitrary ``moment`` (a foreign or faulty writer).

    With ``validate=False`` the payload is not checked against its schema (a
    writer that does not validate could write a negative amount).
    """
    from ledger.core.canonical import sha256_hex
    from ledger.core.envelope import render_line, unsigned_entry
    from ledger.core.timefmt import format_ts
    from ledger.edges.schemas import load_schema
    from ledger.runtime import Runtime
    from ledger.services.chain.writer import Writer

    runtime = Runtime(home, {**env})
    signer = Writer(runtime).signer()
    with runtime.chain.transaction() as tx:
        head = tx.head()
        prev = head.entry_hash if head else "GENESIS"
        if validate:
            from ledger.core.seal import seal

            sealed = seal(
                event_type,
                payload,
                load_schema(event_type),
                moment=moment,
                prev_hash=None if head is None else prev,
                signer=signer,
            )
            tx.append(sealed.line)
            return sealed.entry_hash
        import rfc8785

        entry = unsigned_entry(event_type, payload, format_ts(moment), prev)
        # rfc8785 itself, so a faulty writer can seal floats our writer refuses.
        preimage = rfc8785.dumps(entry)
        tx.append(render_line(preimage, signer.sign_b64(preimage), signer.key_id))
        return sha256_hex(preimage)


# --- holding the chain lock from another process ------------------------------

HOLD_LOCK = """\
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def lock_is_free(path: Path) -> bool:
    """Whether nobody holds ``flock`` on ``path`` right now."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


# --- concurrency workers (importable by 'spawn' children) ---------------------


def verdict_worker(home: str, env: dict[str, str], calls: int, go: str) -> dict[str, int]:
    """Call ``check_verdict`` for $1 ``calls`` times; count the verdicts and reasons."""
    import time
    from threading import Event

    from ledger.runtime import Runtime
    from ledger.services.gate.gate import check_verdict

    runtime = Runtime(Path(home), env)
    pause = Event()
    deadline = time.monotonic() + 30
    while not Path(go).exists() and time.monotonic() < deadline:
        pause.wait(0.002)
    counts: dict[str, int] = {}
    for _ in range(calls):
        key = outcome_key(check_verdict(runtime, 1_000_000))
        counts[key] = counts.get(key, 0) + 1
    return counts


def outcome_key(outcome: Any) -> str:
    """``verdict[/reason][/unrecorded]``: how worker processes tally verdicts."""
    decision = outcome.decision
    key = str(decision.verdict.value)
    if decision.reason is not None:
        key += "/" + decision.reason.value
    if outcome.verdict_ref is None:
        key += "/unrecorded"
    return key


def merge_counts(parts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    return total
