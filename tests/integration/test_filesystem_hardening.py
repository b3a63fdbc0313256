"""Odd files where the home expects regular ones, and clocks past the chain's range.

SPEC §4: a chain path that is not a regular file is an I/O failure (74) found
without blocking, and for ``verdict`` a printed ``halt-uncertainty``. SPEC §3: a
verdict whose clock is outside what the chain can hold is still one printed halt;
a deadline outside it on the command line is a bad command line (2). Key and trust
files that cannot be read are bad input data (65), and a key or trust store that
cannot be written is an I/O failure (74) that leaves the old key active.

Every case that could block (a FIFO) runs as a real process with a short timeout,
so a regression fails the test instead of hanging it.
"""

import datetime as dt
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.core.chain import verify_lines
from ledger.core.timefmt import format_ts, parse_iso8601, parse_ts, utc_day
from ledger.edges.clock import clock_from_env
from ledger.edges.files.keyfiles import KeyDir
from ledger.errors import ClockRangeError, ConfigError
from tests.conftest import Result, clean_env

NOW = "2026-06-01T12:00:00Z"
PROCESS_TIMEOUT = 20
LOCK_TIMEOUT = "2"


def run(home: Path, *args: str, preexec: Callable[[], None] | None = None, **env: str) -> Result:
    """``ledger --home HOME ARGS`` as a real process that must end in time."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=clean_env(
            **{"LEDGER_NOW": NOW, "LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS": LOCK_TIMEOUT, **env}
        ),
        timeout=PROCESS_TIMEOUT,
        check=False,
        preexec_fn=preexec,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def one_error_line(result: Result) -> bool:
    lines = result.stderr.splitlines()
    return len(lines) == 1 and lines[0].startswith("ledger: ")


def assert_printed_halt(result: Result) -> dict[str, object]:
    """The verdict could not be recorded: one halt on stdout, exit 1, one stderr line."""
    assert result.code == 1, result
    document: dict[str, object] = json.loads(result.stdout)
    assert document["verdict"] == "halt-uncertainty", document
    assert document["uncertainty_reason"] == "counter_inconsistent", document
    assert document["verdict_ref"] is None, document
    assert one_error_line(result), result
    assert "Traceback" not in result.stderr
    return document


@pytest.fixture
def made(tmp_path: Path, run_inproc) -> Path:
    """A home with a $10 cap and two entries (a verdict and its record)."""
    home = tmp_path / "home"
    env = {"LEDGER_NOW": NOW}
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "10"]).code == 0
    verdict = run_inproc(["--home", str(home), "verdict", "1", "--provider", "openai"], env=env)
    assert verdict.code == 0, verdict
    ref = verdict.json()["verdict_ref"]
    record = ["record", "1", "--provider", "openai", "--verdict-ref", ref]
    assert run_inproc(["--home", str(home), *record], env=env).code == 0
    return home


def chain_verifies(home: Path) -> bool:
    data = (home / "events.jsonl").read_bytes()
    return verify_lines(data.splitlines(keepends=True), KeyDir(home).load_trust()).ok


# --- 1. the chain path is not a regular file -----------------------------------------


def _replace_chain(home: Path, kind: str, other: Path) -> None:
    chain = home / "events.jsonl"
    chain.unlink()
    if kind == "directory":
        chain.mkdir()
    elif kind == "fifo":
        os.mkfifo(chain)
    elif kind == "dangling symlink":
        chain.symlink_to(home / "no-such-chain")
    else:  # a symlink to another home's (valid, regular) chain
        chain.symlink_to(other / "events.jsonl")


CHAIN_KINDS = ["directory", "fifo", "dangling symlink", "symlink to another home"]


@pytest.fixture
def other_home(tmp_path: Path, run_inproc) -> Path:
    """A second, healthy home whose chain a symbolic link may point at."""
    home = tmp_path / "other"
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "10"]).code == 0
    record = ["--home", str(home), "record", "2", "--provider", "openai"]
    assert run_inproc(record, env={"LEDGER_NOW": NOW}).code == 0
    return home


@pytest.mark.parametrize("kind", CHAIN_KINDS)
def test_verdict_on_a_chain_that_is_not_a_regular_file_prints_a_halt(
    made: Path, other_home: Path, kind: str
) -> None:
    """SPEC §4: the verdict is a printed halt-uncertainty, found without blocking."""
    _replace_chain(made, kind, other_home)
    before = (other_home / "events.jsonl").read_bytes()
    result = run(made, "verdict", "1")
    assert_printed_halt(result)
    assert "not a regular file" in result.stderr
    assert (other_home / "events.jsonl").read_bytes() == before


@pytest.mark.parametrize("kind", CHAIN_KINDS)
@pytest.mark.parametrize(
    "args",
    [
        ("record", "1", "--provider", "openai"),
        ("usage",),
        ("status",),
        ("rebuild-state",),
        ("verify-chain",),
        ("recover",),
        ("snapshot",),
        ("checkpoint",),
        ("keys", "rotate"),
    ],
    ids=lambda args: args[0] if args[0] != "keys" else "keys-rotate",
)
def test_other_commands_on_a_chain_that_is_not_a_regular_file_exit_74(
    made: Path, other_home: Path, kind: str, args: tuple[str, ...]
) -> None:
    """An I/O failure (74) with one stderr line; nothing is written anywhere."""
    _replace_chain(made, kind, other_home)
    keys_before = sorted(p.name for p in (made / "keys").iterdir())
    trust_before = (made / "trust.json").read_bytes()
    other_before = (other_home / "events.jsonl").read_bytes()
    result = run(made, *args)
    assert result.code == 74, result
    assert one_error_line(result), result
    assert "not a regular file" in result.stderr
    assert sorted(p.name for p in (made / "keys").iterdir()) == keys_before  # no orphaned new key
    assert (made / "trust.json").read_bytes() == trust_before
    assert (other_home / "events.jsonl").read_bytes() == other_before


def test_a_symlinked_chain_is_refused_even_when_it_points_at_a_good_chain(
    made: Path, other_home: Path
) -> None:
    """The lock lives beside the path: two homes must never append under two locks."""
    _replace_chain(made, "symlink to another home", other_home)
    result = run(made, "record", "1", "--provider", "openai")
    assert result.code == 74, result
    assert "symbolic link" in result.stderr
    assert run(other_home, "verify-chain").code == 0


def test_tokens_check_on_a_fifo_chain_is_a_refusal(made: Path) -> None:
    """The agent gate fails closed the same way: refused, counter_inconsistent."""
    _replace_chain(made, "fifo", made)
    result = run(made, "tokens", "check", "convoy", "agent", "10")
    assert result.code == 1, result
    assert result.json()["reason"] == "counter_inconsistent"


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_lock_file_that_is_not_a_regular_file_never_blocks(made: Path, kind: str) -> None:
    """``events.jsonl.lock`` as a FIFO or directory: a halt for verdict, 74 for the rest."""
    lock = made / "events.jsonl.lock"
    lock.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    assert_printed_halt(run(made, "verdict", "1"))
    for args in (("usage",), ("record", "1", "--provider", "openai")):
        result = run(made, *args)
        assert result.code == 74, result
        assert one_error_line(result), result


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_verify_chain_log_that_is_not_a_regular_file_exits_74(
    made: Path, tmp_path: Path, kind: str
) -> None:
    """An auditor's LOG that is a FIFO or directory is an I/O failure, not a hang."""
    log = tmp_path / "log"
    if kind == "fifo":
        os.mkfifo(log)
    else:
        log.mkdir()
    pub = next((made / "keys").glob("*.pub.pem"))
    result = run(made, "verify-chain", str(log), "--key", str(pub))
    assert result.code == 74, result
    assert one_error_line(result), result


def test_verify_chain_log_missing_or_dangling_stays_exit_2(made: Path, tmp_path: Path) -> None:
    """SPEC §3: a missing LOG is exit 2, and a dangling link names nothing either."""
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for log in (tmp_path / "missing", dangling):
        result = run(made, "verify-chain", str(log))
        assert result.code == 2, result


def test_verify_chain_log_may_be_a_symlink_to_a_regular_file(made: Path, tmp_path: Path) -> None:
    """Only the home's own chain refuses links; an auditor's LOG is read through one."""
    link = tmp_path / "link.jsonl"
    link.symlink_to(made / "events.jsonl")
    pub = next((made / "keys").glob("*.pub.pem"))
    result = run(made, "verify-chain", str(link), "--key", str(pub))
    assert result.code == 0, result
    assert result.stdout == "OK 2 entries\n"


def test_the_chain_works_again_once_a_regular_file_is_back(made: Path) -> None:
    """Nothing was written while the FIFO stood: putting the chain back heals the home."""
    chain = made / "events.jsonl"
    saved = chain.read_bytes()
    chain.unlink()
    os.mkfifo(chain)
    assert_printed_halt(run(made, "verdict", "1"))
    chain.unlink()
    chain.write_bytes(saved)
    chain.chmod(0o600)
    assert run(made, "verdict", "1").code == 0
    assert run(made, "verify-chain").code == 0


# --- 2. clocks and deadlines outside what the chain can hold ---------------------------


@pytest.mark.parametrize(
    "now",
    [
        "9999-12-31T23:59:59.999999Z",
        "0001-01-01T00:00:00.000000Z",
        "9999-12-31T23:59:59-05:00",  # past the year 9999 once in UTC
        "0001-01-01T00:00:00+01:00",  # before the year 1 once in UTC
        "9999-12-30T00:00:00Z",  # inside datetime's range, too close to its end
    ],
)
def test_verdict_with_a_clock_outside_the_chain_prints_a_halt(made: Path, now: str) -> None:
    """SPEC §3: never exit 70, never an empty stdout; nothing is appended."""
    before = (made / "events.jsonl").read_bytes()
    document = assert_printed_halt(run(made, "verdict", "1", LEDGER_NOW=now))
    assert document["usd_used"] == 0.0  # figures of an empty day: nothing was folded
    assert (made / "events.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    "args",
    [
        ("record", "1", "--provider", "openai"),
        ("usage",),
        ("status",),
        ("checkpoint",),
        ("snapshot",),
        ("keys", "rotate"),
        ("time", "start", "--budget-seconds", "60"),
    ],
    ids=lambda args: "-".join(args[:2]),
)
def test_other_commands_with_a_clock_outside_the_chain_are_config_errors(
    made: Path, args: tuple[str, ...]
) -> None:
    """``LEDGER_NOW`` past what the chain can hold: 78 naming it, nothing written."""
    before = (made / "events.jsonl").read_bytes()
    result = run(made, *args, LEDGER_NOW="9999-12-31T23:59:59.999999Z")
    assert result.code == 78, result
    assert one_error_line(result), result
    assert "LEDGER_NOW" in result.stderr
    assert (made / "events.jsonl").read_bytes() == before


def test_tokens_check_with_a_clock_outside_the_chain_is_a_refusal(made: Path) -> None:
    """The agent gate answers like the USD gate: refused, counter_inconsistent, exit 1."""
    assert run(made, "tokens", "create", "c", "--convoy-max", "100").code == 0
    result = run(made, "tokens", "check", "c", "a", "5", LEDGER_NOW="0001-01-01T00:00:00Z")
    assert result.code == 1, result
    assert result.json()["reason"] == "counter_inconsistent"


def test_a_reservation_expiry_past_the_chain_is_an_unrecorded_halt(made: Path) -> None:
    """A legal clock plus a century's TTL overflows: a halt, not exit 70, no verdict sealed.

    The changed TTL itself is a change of ``usd.*``, sealed as ``config.changed``
    before any verdict under it (SPEC §21): that entry is the only one added.
    """
    before = (made / "events.jsonl").read_bytes()
    result = run(
        made, "verdict", "1",
        LEDGER_NOW="9999-12-29T00:00:00Z", LEDGER_USD_RESERVATION_TTL_SECONDS="3153600000",
    )  # fmt: skip
    assert_printed_halt(result)
    after = (made / "events.jsonl").read_bytes()
    assert after.startswith(before)
    added = [json.loads(line) for line in after[len(before) :].splitlines()]
    assert [entry["event_type"] for entry in added] == ["config.changed"]
    assert added[0]["payload"]["after"]["usd"]["reservation_ttl_seconds"] == 3153600000


def test_clocks_just_inside_the_range_still_work(made: Path) -> None:
    """Two days from either end is a usable clock, and what it seals verifies."""
    assert run(made, "verdict", "1", LEDGER_NOW="0001-01-03T00:00:00Z").code == 1  # clock_drift
    assert run(made, "verdict", "1", LEDGER_NOW="9999-12-29T23:59:59.999999Z").code == 0
    assert chain_verifies(made)
    assert run(made, "verify-chain").code == 0


@pytest.mark.parametrize(
    "end", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+01:00", "+10000-01-01T00:00:00Z"]
)
def test_time_start_end_outside_the_chain_is_a_bad_command_line(made: Path, end: str) -> None:
    """``--end`` that is no UTC time the chain can hold: exit 2, one line."""
    result = run(made, "time", "start", "--end", end)
    assert result.code == 2, result
    assert result.stderr.splitlines()[-1].startswith("ledger: --end")
    assert "Traceback" not in result.stderr


def test_time_start_budget_past_the_chain_is_a_bad_command_line(made: Path) -> None:
    """A century's budget two days before the year 10000 has no deadline: exit 2."""
    result = run(
        made, "time", "start", "--budget-seconds", "3153600000",
        LEDGER_NOW="9999-12-29T00:00:00Z",
    )  # fmt: skip
    assert result.code == 2, result
    assert one_error_line(result), result


@pytest.mark.parametrize("value", ["999999999999", "253402300800", "-5", "1e30", "nan"])
def test_budget_end_outside_the_chain_is_a_config_error(made: Path, value: str) -> None:
    """``LEDGER_BUDGET_END`` huge, negative or not a number: 78, never 70."""
    for args in (("time", "status"), ("status",)):
        result = run(made, *args, LEDGER_BUDGET_END=value)
        assert result.code == 78, result
        assert one_error_line(result), result


def test_budget_end_at_the_last_second_the_chain_holds_works(made: Path) -> None:
    """9999-12-31T23:59:59Z in Unix seconds is a deadline like any other."""
    result = run(made, "time", "status", LEDGER_BUDGET_END="253402300799")
    assert result.code == 0, result
    assert result.json()["deadline"] == "9999-12-31T23:59:59.000000Z"


class TestTimeFormat:
    def test_years_before_1000_are_written_with_four_digits(self) -> None:
        """SPEC §2's ``YYYY``: the year 1 is ``0001`` (strftime writes ``1`` on glibc)."""
        moment = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
        assert format_ts(moment) == "0001-01-01T00:00:00.000000Z"
        assert parse_ts(format_ts(moment)) == moment
        assert utc_day(moment) == "0001-01-01"

    def test_an_offset_time_past_year_9999_in_utc_is_a_value_error(self) -> None:
        """Not an OverflowError: callers map ValueError to their documented code."""
        with pytest.raises(ValueError, match="outside the years"):
            parse_iso8601("9999-12-31T23:59:59-05:00")

    def test_ledger_now_outside_the_chain_raises_when_read(self) -> None:
        """The clock is built (verdict still prints a halt) but reading it refuses."""
        clock = clock_from_env({"LEDGER_NOW": "9999-12-31T23:59:59-05:00"})
        with pytest.raises(ClockRangeError) as caught:
            clock.now()
        assert caught.value.moment == dt.datetime.max.replace(tzinfo=dt.UTC)
        assert isinstance(caught.value, ConfigError)

    def test_ledger_now_malformed_is_still_a_config_error_at_once(self) -> None:
        with pytest.raises(ConfigError):
            clock_from_env({"LEDGER_NOW": "9999-99-99T00:00:00Z"})


# --- 3. keys and the trust store cannot be written ------------------------------------


def _no_file_writes() -> None:
    # Every write() to a file fails with EFBIG (Python ignores SIGXFSZ): a home
    # that can be read but not written, without needing a read-only mount.
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_keys_rotate_when_nothing_can_be_written_exits_74_and_keeps_the_old_key(
    made: Path,
) -> None:
    """SPEC §3: an I/O failure (74), one line; the old key stays active, nothing half-made."""
    keys_before = sorted(p.name for p in (made / "keys").iterdir())
    trust_before = (made / "trust.json").read_bytes()
    chain_before = (made / "events.jsonl").read_bytes()
    result = run(made, "keys", "rotate", preexec=_no_file_writes)
    assert result.code == 74, result
    assert one_error_line(result), result
    assert sorted(p.name for p in (made / "keys").iterdir()) == keys_before
    assert (made / "trust.json").read_bytes() == trust_before
    assert (made / "events.jsonl").read_bytes() == chain_before
    assert chain_verifies(made)
    assert run(made, "verdict", "1").code == 0  # the old key still signs


def test_keys_rotate_when_the_key_directory_is_a_file_exits_65(made: Path) -> None:
    """``keys/`` replaced by a file: the active key cannot be read (65), nothing written."""
    (made / "keys").rename(made / "keys.saved")
    (made / "keys").write_bytes(b"")
    chain_before = (made / "events.jsonl").read_bytes()
    result = run(made, "keys", "rotate")
    assert result.code == 65, result
    assert one_error_line(result), result
    assert (made / "events.jsonl").read_bytes() == chain_before
    assert_printed_halt(run(made, "verdict", "1"))


def test_keys_rotate_when_the_trust_store_cannot_be_replaced(made: Path, run_inproc) -> None:
    """The rotation is sealed, the trust store is not replaced: 74, old key still active.

    README: the event is appended first and the trust store replaced second, so
    a failure between the two leaves the chain verifying and the old key in charge.
    """
    # atomic_write's temp file for trust.json, in this process: a directory there
    # makes the replacement fail after the chain was appended to.
    blocker = made / f".trust.json.{os.getpid()}.tmp"
    blocker.mkdir()
    trust_before = (made / "trust.json").read_bytes()
    env = {"LEDGER_NOW": NOW}
    result = run_inproc(["--home", str(made), "keys", "rotate"], env=env)
    assert result.code == 74, result
    assert one_error_line(result), result
    assert (made / "trust.json").read_bytes() == trust_before
    assert chain_verifies(made)
    blocker.rmdir()
    assert run_inproc(["--home", str(made), "verdict", "1"], env=env).code == 0
    assert run_inproc(["--home", str(made), "verify-chain"], env=env).code == 0


# --- 4. key and trust files that cannot be read ---------------------------------------


def _private_key(home: Path) -> Path:
    return next((home / "keys").glob("*.key.pem"))


@pytest.mark.parametrize("kind", ["directory", "fifo"])
@pytest.mark.parametrize("which", ["trust store", "private key"])
def test_unreadable_key_or_trust_store(made: Path, which: str, kind: str) -> None:
    """Verdict: a printed halt. Record and keys rotate: 65. Never a hang, never 70."""
    path = made / "trust.json" if which == "trust store" else _private_key(made)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.mkdir(0o700)
    assert_printed_halt(run(made, "verdict", "1"))
    commands: list[tuple[str, ...]] = [("record", "1", "--provider", "openai"), ("keys", "rotate")]
    if which == "trust store":
        commands.append(("verify-chain",))
    for args in commands:
        result = run(made, *args)
        assert result.code == 65, (args, result)
        assert one_error_line(result), result
        assert "not a regular file" in result.stderr


@pytest.mark.parametrize("option", ["--key", "--trust-store", "--checkpoint"])
def test_verify_chain_option_file_that_is_a_fifo_exits_65(
    made: Path, tmp_path: Path, option: str
) -> None:
    """SPEC §3: an unreadable --key, --trust-store or --checkpoint file exits 65."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = run(made, "verify-chain", option, str(fifo))
    assert result.code == 65, result
    assert one_error_line(result), result


def test_state_mac_key_that_is_a_fifo(made: Path) -> None:
    """The derived state's MAC key as a FIFO: a halt for verdict, 74 for usage."""
    mac = made / "keys" / "state-mac.key"
    mac.unlink()
    os.mkfifo(mac, 0o600)
    assert_printed_halt(run(made, "verdict", "1"))
    result = run(made, "usage")
    assert result.code == 74, result
    assert one_error_line(result), result


def test_derived_state_that_is_a_fifo_is_counter_inconsistent(made: Path) -> None:
    """SPEC §4 row 1: unreadable derived state halts until ``rebuild-state``."""
    state = made / "state" / "derived.json"
    state.unlink()
    os.mkfifo(state, 0o600)
    result = run(made, "verdict", "1")
    assert result.code == 1, result
    assert result.json()["uncertainty_reason"] == "counter_inconsistent"
    assert run(made, "rebuild-state").code == 0
    assert run(made, "verdict", "1").code == 0


def test_config_that_is_a_fifo_is_a_config_error(made: Path) -> None:
    """``ledger.toml`` as a FIFO: 78 naming the file, without blocking."""
    config = made / "ledger.toml"
    config.unlink()
    os.mkfifo(config)
    result = run(made, "verdict", "1")
    assert result.code == 78, result
    assert one_error_line(result), result
    assert "ledger.toml" in result.stderr
