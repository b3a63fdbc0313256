"""Battery: filesystem. Odd files where a home expects regular ones, and homes that
cannot be written: every command ends in time, with a documented exit code.

Each scenario is made on a fresh copy of one mixed home (every kind of event):

* the chain path (``events.jsonl``) as a directory, a FIFO, a character device (where
  ``mknod`` is permitted), a dangling symbolic link, and a symbolic link to another
  home's healthy chain (refused: the lock lives beside the path, so two homes would
  append under two locks);
* the chain's lock file as a FIFO and as a directory;
* a read-only home: a read-only bind mount where mounting is permitted; always
  ``keys/`` replaced by a regular file, and processes that cannot write any file
  (``RLIMIT_FSIZE`` 0, every write fails with ``EFBIG``);
* a full disk: covered by the disk-full battery (``test_battery_disk_full.py``);
* key and trust files that cannot be read: ``trust.json`` and the private key as a
  directory and as a FIFO, the pinned root key as a FIFO, the derived state's MAC key
  and ``state/derived.json`` as FIFOs;
* ``ledger.toml`` as a FIFO: a configuration error (78) for every command, ``verdict``
  included (SPEC §3 gives ``verdict`` 78 for config errors).

In each, ``verdict``, ``record``, ``usage``, ``status``, ``tokens check``,
``rebuild-state``, ``verify-chain``, ``recover``, ``snapshot``, ``checkpoint`` and
``keys rotate`` run as real processes with ``chain.lock_timeout_seconds`` 2 and a
process timeout well under the test's. Each must finish within the lock timeout plus
a margin, exit with a documented code (0, 1, 2, 65, 74, 75, 78: never 70), print no
traceback and at most one ``ledger: `` error line (exactly one when it printed no
result). ``verdict`` always prints a JSON decision, never ``allow``. A ``keys rotate``
that fails leaves the key files and the trust store as they were. When the scenario
is undone the chain still verifies, and a chain that was moved aside was not written
to. A control run on the untouched home must admit the verdict and succeed everywhere,
so the halts above are the scenarios' doing.
"""

import contextlib
import datetime as dt
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ledger.core.chain import verify_lines
from ledger.edges.files.keyfiles import KeyDir
from tests.batteries.common import BASE, build_mixed_home, iso, summary
from tests.conftest import Result, clean_env

DOCUMENTED = frozenset({0, 1, 2, 65, 74, 75, 78})
LOCK_TIMEOUT = 2
MARGIN = 8  # interpreter start-up and imports on a loaded 2-core machine
PROCESS_TIMEOUT = 30  # well under the test's own timeout: a hang is a failure, not a stall
COMMANDS: list[tuple[str, ...]] = [
    ("verdict", "0.5"),
    ("record", "0.25", "--provider", "openai"),
    ("usage",),
    ("status",),
    ("tokens", "check", "convoy-a", "agent-1", "10"),
    ("rebuild-state",),
    ("verify-chain",),
    ("recover",),
    ("snapshot",),
    ("checkpoint",),
    ("keys", "rotate"),
]


class UnavailableError(Exception):
    """This machine cannot make the scenario (no mount, no mknod); the reason."""


Undo = Callable[[], None]


@dataclass
class Scenario:
    """How to break a home, and how to put it back."""

    name: str
    make: Callable[[Path, Path], Undo]
    preexec: Callable[[], None] | None = None
    config_error: bool = False  # every command is a config error (78)
    control: bool = False


@dataclass
class Tally:
    passed: int = 0
    failures: list[str] = field(default_factory=list)
    codes: Counter[int] = field(default_factory=Counter)
    slowest: float = 0.0
    skipped: list[str] = field(default_factory=list)
    scenarios: int = 0


# --- scenarios ---------------------------------------------------------------------------


def _aside(path: Path) -> Path:
    saved = path.with_name(path.name + ".saved")
    path.rename(saved)
    return saved


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _restore(path: Path, saved: Path) -> Undo:
    def undo() -> None:
        _remove(path)
        saved.rename(path)

    return undo


def _active_key_file(home: Path) -> Path:
    """The writer key that signs now: the trusted key with no end of validity."""
    trust = json.loads((home / "trust.json").read_text())
    active = next(
        k["key_id"] for k in trust["keys"] if k.get("valid_until") is None and k.get("signs", True)
    )
    return home / "keys" / f"{active}.key.pem"


def _replaced(relative: str, kind: str) -> Callable[[Path, Path], Undo]:
    """Move ``relative`` aside and put a ``kind`` in its place."""

    def make(home: Path, other: Path) -> Undo:
        path = home / relative
        if relative == "KEY":
            path = _active_key_file(home)
        saved = _aside(path) if path.exists() or path.is_symlink() else None
        if kind == "directory":
            path.mkdir(mode=0o700)
        elif kind == "fifo":
            os.mkfifo(path, 0o600)
        elif kind == "file":
            path.write_bytes(b"")
        elif kind == "device":
            try:
                os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
            except OSError as exc:
                if saved is not None:
                    saved.rename(path)
                raise UnavailableError(f"mknod not permitted ({exc.strerror})") from exc
        elif kind == "dangling symlink":
            path.symlink_to(home / "no-such-file")
        else:  # a symbolic link to another home's file of the same name
            path.symlink_to(other / relative)
        if saved is None:
            return lambda: _remove(path)
        return _restore(path, saved)

    return make


def _run_quiet(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def _read_only_mount(home: Path, _other: Path) -> Undo:
    """Bind-mount the home read-only over itself (needs the right to mount)."""
    done = _run_quiet(["mount", "--bind", str(home), str(home)])
    if done.returncode != 0:
        raise UnavailableError(f"bind mount not permitted: {done.stderr.strip()[:120]}")
    again = _run_quiet(["mount", "-o", "remount,bind,ro", str(home)])
    if again.returncode != 0:
        _run_quiet(["umount", str(home)])
        raise UnavailableError(f"read-only remount not permitted: {again.stderr.strip()[:120]}")

    def undo() -> None:
        if _run_quiet(["umount", str(home)]).returncode != 0:
            _run_quiet(["umount", "-l", str(home)])

    return undo


def _no_file_writes() -> None:
    # Python ignores SIGXFSZ, so every write() to a file fails with EFBIG: a home
    # that can be read but not written, without privileges.
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def _nothing(_home: Path, _other: Path) -> Undo:
    return lambda: None


SCENARIOS = [
    Scenario("control (untouched home)", _nothing, control=True),
    Scenario("chain is a directory", _replaced("events.jsonl", "directory")),
    Scenario("chain is a FIFO", _replaced("events.jsonl", "fifo")),
    Scenario("chain is a character device", _replaced("events.jsonl", "device")),
    Scenario("chain is a dangling symlink", _replaced("events.jsonl", "dangling symlink")),
    Scenario("chain is a symlink to another home's chain", _replaced("events.jsonl", "link")),
    Scenario("chain lock is a FIFO", _replaced("events.jsonl.lock", "fifo")),
    Scenario("chain lock is a directory", _replaced("events.jsonl.lock", "directory")),
    Scenario("read-only home (bind mount)", _read_only_mount),
    Scenario("read-only home (keys/ is a file)", _replaced("keys", "file")),
    Scenario("read-only home (no file can be written)", _nothing, preexec=_no_file_writes),
    Scenario("trust.json is a directory", _replaced("trust.json", "directory")),
    Scenario("trust.json is a FIFO", _replaced("trust.json", "fifo")),
    Scenario("private key is a directory", _replaced("KEY", "directory")),
    Scenario("private key is a FIFO", _replaced("KEY", "fifo")),
    Scenario("pinned root key is a FIFO", _replaced("trust-root.pub.pem", "fifo")),
    Scenario("state MAC key is a FIFO", _replaced("keys/state-mac.key", "fifo")),
    Scenario("derived state is a FIFO", _replaced("state/derived.json", "fifo")),
    Scenario("ledger.toml is a FIFO", _replaced("ledger.toml", "fifo"), config_error=True),
]


# --- one command -------------------------------------------------------------------------


def run_timed(
    home: Path, args: tuple[str, ...], env: dict[str, str], preexec: Callable[[], None] | None
) -> tuple[Result | None, float]:
    """``ledger --home HOME ARGS`` as a real process; ``None`` when it had to be killed."""
    from ledger.edges.clock import monotonic

    started = monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ledger", "--home", str(home), *args],
            capture_output=True,
            text=True,
            env=clean_env(**env),
            timeout=PROCESS_TIMEOUT,
            check=False,
            preexec_fn=preexec,
        )
    except subprocess.TimeoutExpired:
        return None, monotonic() - started
    return Result(proc.returncode, proc.stdout, proc.stderr), monotonic() - started


def contract_problems(scenario: Scenario, args: tuple[str, ...], result: Result) -> list[str]:
    """Everything wrong with how one command ended."""
    problems = []
    if result.code not in DOCUMENTED:
        problems.append(f"undocumented exit {result.code}")
    if "Traceback" in result.stdout or "Traceback" in result.stderr:
        problems.append("traceback")
    marked = [line for line in result.stderr.splitlines() if line.startswith("ledger: ")]
    errors = [line for line in marked if not line.startswith("ledger: warning: ")]
    if len(errors) > 1:
        problems.append(f"{len(errors)} error lines")
    if result.code != 0 and not result.stdout.strip() and len(errors) != 1:
        problems.append("failed without exactly one `ledger: ` line")
    if scenario.config_error:
        if result.code != 78:  # SPEC §3's config error
            problems.append(f"expected a config error (78), got {result.code}")
        return problems
    if scenario.control:
        if result.code != 0:
            problems.append(f"control run exited {result.code}")
    if args[0] == "verdict":
        try:
            decision = json.loads(result.stdout)["verdict"]
        except (ValueError, KeyError, TypeError):
            problems.append("verdict printed no JSON decision")
        else:
            if scenario.control and decision != "allow":
                problems.append(f"control verdict was {decision}")
            if not scenario.control and (decision == "allow" or result.code != 1):
                problems.append(f"verdict {decision}, exit {result.code}")
    return problems


def key_files(home: Path) -> list[str]:
    keys = home / "keys"
    return sorted(p.name for p in keys.iterdir()) if keys.is_dir() else []


def trust_bytes(home: Path) -> bytes | None:
    path = home / "trust.json"
    if not path.is_file():
        return None
    return path.read_bytes()


def chain_verifies(home: Path) -> str | None:
    """Why the home's chain does not verify (whole lines, links, signatures), or ``None``."""
    data = (home / "events.jsonl").read_bytes()
    if data and not data.endswith(b"\n"):
        return "the chain ends in a torn line"
    report = verify_lines(data.splitlines(keepends=True), KeyDir(home).load_trust())
    return None if report.ok else f"line {report.line}: {report.reason}"


@contextlib.contextmanager
def made(scenario: Scenario, home: Path, other: Path) -> Iterator[None]:
    undo = scenario.make(home, other)
    try:
        yield
    finally:
        undo()


def exercise(
    scenario: Scenario, clean: Path, other: Path, work: Path, env: dict[str, str], tally: Tally
) -> None:
    """Every command on a fresh copy of the home broken the scenario's way."""
    other_chain = (other / "events.jsonl").read_bytes()
    for index, args in enumerate(COMMANDS):
        home = work / f"s{tally.scenarios}-{len(tally.skipped)}-c{index}"
        shutil.copytree(clean, home, symlinks=True)
        chain_before = (home / "events.jsonl").read_bytes()
        label = f"[{scenario.name}] {' '.join(args)}"
        try:
            with made(scenario, home, other):
                keys_before, trust_before = key_files(home), trust_bytes(home)
                result, elapsed = run_timed(home, args, env, scenario.preexec)
                keys_after, trust_after = key_files(home), trust_bytes(home)
        except UnavailableError as exc:
            tally.skipped.append(f"{scenario.name}: {exc}")
            shutil.rmtree(home)
            return
        tally.slowest = max(tally.slowest, elapsed)
        problems = []
        if result is None:
            problems.append(f"still running after {PROCESS_TIMEOUT} s (killed)")
        else:
            tally.codes[result.code] += 1
            if elapsed > LOCK_TIMEOUT + MARGIN:
                problems.append(f"took {elapsed:.1f} s")
            problems += contract_problems(scenario, args, result)
            if args[0] == "keys" and result.code != 0 and (keys_after, trust_after) != (
                keys_before, trust_before,
            ):  # fmt: skip
                problems.append("a failed rotation changed the key files or the trust store")
        broken = chain_verifies(home)
        if broken is not None:
            problems.append(f"once undone, the chain does not verify: {broken}")
        moved_aside = scenario.name.startswith("chain is")
        if moved_aside and (home / "events.jsonl").read_bytes() != chain_before:
            problems.append("the chain moved aside was written to")
        if (other / "events.jsonl").read_bytes() != other_chain:
            problems.append("another home's chain was written to")
        if problems:
            shown = (
                ""
                if result is None
                else f" -> exit {result.code}, {result.stderr.strip()[-160:]!r}"
            )
            tally.failures.append(f"{label}: {'; '.join(problems)}{shown}")
        else:
            tally.passed += 1
        shutil.rmtree(home)
    tally.scenarios += 1


# --- the battery -------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_filesystem_battery(run_inproc, tmp_path, capsys):
    mixed = build_mixed_home(run_inproc, tmp_path / "mixed", tmp_path / "mixed-work", pairs=4)
    env = {
        "LEDGER_NOW": iso(BASE + dt.timedelta(seconds=mixed.seconds + 60)),
        "LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS": str(LOCK_TIMEOUT),
        "LEDGER_BILLING_STALE_HALT_PCT": "100",  # the control verdict is admitted
    }
    other = tmp_path / "other"  # a healthy home whose chain a symbolic link points at
    assert run_inproc(["--home", str(other), "init", "--daily-cap-usd", "100"]).code == 0
    record = ["--home", str(other), "record", "1", "--provider", "openai"]
    assert run_inproc(record, env=env).code == 0
    work = tmp_path / "work"
    work.mkdir()
    tally = Tally()
    for scenario in SCENARIOS:
        exercise(scenario, mixed.home, other, work, env, tally)
    failed = len(tally.failures)
    hung = sum("killed" in failure for failure in tally.failures)
    codes = ", ".join(f"{code}: {count}" for code, count in sorted(tally.codes.items()))
    skipped = f"; skipped {'; '.join(tally.skipped)}" if tally.skipped else ""
    summary(
        capsys, "filesystem", tally.passed, failed,
        f"{tally.scenarios} scenarios x {len(COMMANDS)} commands as real processes; "
        f"exit codes {{{codes}}}; hung {hung}; slowest {tally.slowest:.1f} s "
        f"(limit {LOCK_TIMEOUT + MARGIN} s); full disk: see battery disk-full{skipped}",
    )  # fmt: skip
    assert not tally.failures, "\n".join(tally.failures[:30])
