"""The USD gate through its command line: ``verdict``, ``record``, ``usage`` (SPEC §1, §3, §4).

Most commands run in-process (``run_inproc``); a few run as real processes to
check what a hook sees. The clock is fixed with ``LEDGER_NOW``. Unless a test is
about billing freshness, ``LEDGER_BILLING_STALE_HALT_PCT=100`` keeps the
"no fresh bill near the cap" rule out of the way of the cap arithmetic.
"""

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env, run_process
from tests.gate_helpers import (
    BASE,
    Observer,
    append_raw_entry,
    at,
    chain_entries,
    chain_lines,
    entry_hash,
    env_at,
    events_of,
    home_files,
    record_payload,
    state_path,
)
from tests.pg import STORES

DAY = "2026-03-01"
NUMBER = (int, float)


@pytest.fixture
def ledger(run_inproc, home):
    """Run ``ledger --home HOME ARGS`` in-process; the env defaults to ``env_at(0)``."""

    def run(*args: str, env: dict[str, str] | None = None):
        return run_inproc(["--home", str(home), *args], env if env is not None else env_at())

    return run


def ok(result):
    assert result.code == 0, (result.code, result.stdout, result.stderr)
    return result.json()


def verdict(ledger, amount: str, *args: str, env=None):
    """Run ``verdict``; check one JSON line and the exit code its decision implies."""
    result = ledger("verdict", amount, *args, env=env)
    assert result.stdout.count("\n") == 1, result
    document = result.json()
    expected = 0 if document["verdict"] in {"allow", "warn-90"} else 1
    assert result.code == expected, result
    return document


def record(ledger, amount: str, provider: str = "openai", *args: str, env=None):
    return ok(ledger("record", amount, "--provider", provider, *args, env=env))


def usage(ledger, *args: str, env=None):
    return ok(ledger("usage", *args, env=env))


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("ledger: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# --- output fields ----------------------------------------------------------

VERDICT_FIELDS = {
    "verdict": str,
    "verdict_ref": str,
    "usd_used": NUMBER,
    "usd_reserved": NUMBER,
    "usd_remaining": NUMBER,
    "daily_cap_usd": NUMBER,
    "estimated_usd_for_call": NUMBER,
    "usage_pct": NUMBER,
    "deciding_cap": str,
    "provider": str,
    "utc_day": str,
    "billing_api_age_seconds": (type(None), *NUMBER),
    "counter_age_seconds": (type(None), *NUMBER),
    "uncertainty_reason": (type(None), str),
    "diagnostic": (type(None), str),
    "usd_used_micros": int,
    "usd_reserved_micros": int,
    "daily_cap_micros": int,
    "estimated_micros": int,
}


def check_types(document: dict[str, Any], fields: dict[str, Any]) -> None:
    for name, kind in fields.items():
        assert name in document, name
        assert not isinstance(document[name], bool), name
        assert isinstance(document[name], kind), (name, document[name])


@STORES
def test_verdict_prints_every_field_with_its_type(ledger, home):
    result = ledger("verdict", "1.25", "--cycle-id", "c-1", "--agent", "planner")
    assert result.code == 0, result
    assert result.stderr == ""
    document = result.json()
    check_types(document, VERDICT_FIELDS)
    assert document["verdict"] == "allow"
    assert document["usd_used"] == 0
    assert document["usd_reserved"] == 0
    assert document["usd_remaining"] == 100
    assert document["daily_cap_usd"] == 100
    assert document["estimated_usd_for_call"] == 1.25
    assert document["estimated_micros"] == 1_250_000
    assert document["daily_cap_micros"] == 100_000_000
    assert document["usage_pct"] == 1.25
    assert document["deciding_cap"] == "aggregate"
    assert document["provider"] == "aggregate"
    assert document["utc_day"] == DAY
    assert document["billing_api_age_seconds"] is None
    assert document["counter_age_seconds"] is None
    assert document["uncertainty_reason"] is None
    assert document["diagnostic"] is None
    # verdict_ref is the hash of the verdict's own envelope, the chain's new head
    lines = chain_lines(home)
    assert len(lines) == 1
    assert re.fullmatch(r"[0-9a-f]{64}", document["verdict_ref"])
    assert document["verdict_ref"] == entry_hash(lines[-1])
    envelope = json.loads(lines[-1])
    assert envelope["event_type"] == "budget.allow"
    assert envelope["ts_utc"] == "2026-03-01T12:00:00.000000Z"
    payload = envelope["payload"]
    assert payload["cycle_id"] == "c-1"
    assert payload["agent"] == "planner"
    assert payload["estimated_micros"] == 1_250_000
    assert payload["reservation"] == {
        "micros": 1_250_000,
        "expires_at": "2026-03-01T12:15:00.000000Z",  # reservation_ttl_seconds = 900
    }


@STORES
def test_halt_uncertainty_prints_reason_and_diagnostic(ledger):
    # default stale_halt_pct (75) and no observer: above 75 % the gate halts
    record(ledger, "80", env=env_at(cap_only=False))
    result = ledger("verdict", "1", env=env_at(cap_only=False))
    assert result.code == 1
    document = result.json()
    check_types(document, VERDICT_FIELDS)
    assert document["verdict"] == "halt-uncertainty"
    assert document["uncertainty_reason"] == "billing_stale"
    assert isinstance(document["diagnostic"], str)
    assert document["diagnostic"]


@STORES
def test_record_prints_every_field(ledger, home):
    ref = verdict(ledger, "2")["verdict_ref"]
    result = ledger(
        "record", "1.5", "--provider", "openai", "--verdict-ref", ref, "--model-id", "gpt-x",
        "--cycle-id", "c-9", "--input-tokens", "100", "--output-tokens", "20",
    )  # fmt: skip
    assert result.code == 0, result
    assert result.stderr == ""
    document = result.json()
    assert document["recorded"] is True
    assert document["settled"] is True
    assert document["entry_hash"] == entry_hash(chain_lines(home)[-1])
    assert document["provider"] == "openai"
    assert document["actual_usd"] == 1.5
    assert document["actual_micros"] == 1_500_000
    assert document["verdict_ref"] == ref
    assert document["utc_day"] == DAY
    payload = chain_entries(home)[-1]["payload"]
    assert chain_entries(home)[-1]["event_type"] == "budget.record_call"
    assert payload["actual_micros"] == 1_500_000
    assert payload["model_id"] == "gpt-x"
    assert payload["cycle_id"] == "c-9"
    assert payload["input_tokens"] == 100
    assert payload["output_tokens"] == 20
    assert payload["verdict_ref"] == ref


USAGE_FIELDS = {
    "usd_used": NUMBER,
    "usd_reserved": NUMBER,
    "usd_remaining": NUMBER,
    "daily_cap_usd": NUMBER,
    "provider_cap_usd": (type(None), *NUMBER),
    "utc_day": str,
    "billing_api_age_seconds": (type(None), *NUMBER),
    "counter_age_seconds": (type(None), *NUMBER),
    "uncertainty_reason": (type(None), str),
    "diagnostic": (type(None), str),
}


@STORES
def test_usage_prints_every_field(ledger):
    caps = {"LEDGER_USD_PROVIDER_CAPS": '{"openai": 5}'}
    record(ledger, "4", "openai", env=env_at(**caps))
    record(ledger, "50", "anthropic", env=env_at(**caps))
    verdict(ledger, "2", env=env_at(10, **caps))  # an aggregate reservation
    document = usage(ledger, env=env_at(30, **caps))
    check_types(document, USAGE_FIELDS)
    assert document["usd_used"] == 54
    assert document["usd_reserved"] == 2
    assert document["usd_remaining"] == 44
    assert document["daily_cap_usd"] == 100
    assert document["provider_cap_usd"] is None
    assert document["utc_day"] == DAY
    assert document["counter_age_seconds"] == 30
    assert document["billing_api_age_seconds"] is None
    assert document["uncertainty_reason"] is None
    own = usage(ledger, "--provider", "openai", env=env_at(30, **caps))
    check_types(own, USAGE_FIELDS)
    assert own["usd_used"] == 4
    assert own["provider_cap_usd"] == 5
    assert own["daily_cap_usd"] == 100
    assert own["usd_remaining"] == 1  # the tighter of 100 − 54 − 2 and 5 − 4


def test_usage_without_a_daily_cap_still_answers(tmp_path, run_inproc):
    bare = tmp_path / "bare"
    assert run_inproc(["--home", str(bare), "init"]).code == 0
    result = run_inproc(["--home", str(bare), "usage"], env_at())
    assert result.code == 0, result
    assert result.json()["daily_cap_usd"] is None


# --- exit codes ---------------------------------------------------------------


@STORES
def test_exit_codes_allow_warn_halt(ledger):
    assert ledger("verdict", "1").code == 0
    record(ledger, "88")
    warn = ledger("verdict", "1")
    assert (warn.code, warn.json()["verdict"]) == (0, "warn-90")
    halt = ledger("verdict", "20")
    assert (halt.code, halt.json()["verdict"]) == (1, "halt-100")


@pytest.mark.parametrize(
    "args",
    [
        ["verdict"],
        ["verdict", "1", "--bogus"],
        ["verdict", "1", "2"],
        ["verdict", "abc"],
        ["verdict", "nan"],
        ["verdict", "inf"],
        ["verdict", "-1"],
        ["verdict", "--", "-0.01"],
        ["verdict", "1", "--provider", "OpenAI"],
        ["verdict", "1", "--provider", "9lives"],
        ["verdict", "1", "--provider", "a" * 65],
        ["verdict", "1", "--provider", ""],
        ["verdict", "1", "--agent", "a" * 257],
        ["verdict", "1", "--cycle-id", "c" * 257],
        ["record", "-1", "--provider", "openai"],
        ["record", "-0.5", "--provider", "openai"],
        ["record", "1"],
        ["record", "1", "--provider", "Open AI"],
        ["record", "1", "--provider", "openai", "--verdict-ref", "abc"],
        ["record", "1", "--provider", "openai", "--verdict-ref", "A" * 64],
        ["record", "1", "--provider", "openai", "--verdict-ref", "0" * 63 + "g"],
        ["record", "1", "--provider", "openai", "--verdict-ref", "0" * 65],
        ["record", "1", "--provider", "openai", "--input-tokens", "-3"],
        ["record", "1", "--provider", "openai", "--output-tokens", "x"],
        ["usage", "--provider", "Bad!"],
        ["usage", "--bogus"],
    ],
)
def test_bad_command_line_exits_2_and_writes_nothing(ledger, home, args):
    before = chain_lines(home)
    result = ledger(*args)
    assert result.code == 2, result
    assert result.stdout == ""
    one_error_line(result.stderr)
    assert chain_lines(home) == before


@pytest.mark.parametrize("command", ["verdict", "record"])
def test_amount_too_large_for_the_chain_is_refused_cleanly(ledger, home, command):
    """An amount no JSON reader keeps exact (> 2**53 − 1 micro-USD) is a bad command line.

    (Or, for ``verdict``, a halt that is printed: SPEC §3 never allows exit 1 without
    a decision on stdout.)
    """
    args = ["--provider", "openai"] if command == "record" else []
    result = ledger(command, "1e30", *args)
    assert "Traceback" not in result.stderr
    if command == "verdict" and result.code == 1:
        assert result.stdout, f"exit 1 without a decision on stdout: {result.stderr!r}"
        assert result.json()["verdict"] == "halt-uncertainty"
    else:
        assert result.code == 2, result
        one_error_line(result.stderr)
        assert chain_lines(home) == []


def test_a_huge_daily_cap_is_refused_or_honoured_never_a_silent_exit_1(ledger, home):
    """SPEC §1 bounds caps only below (≥ 0); a cap the chain cannot hold exactly must be
    a config error naming the key (78), or the verdict must still print its decision."""
    result = ledger("verdict", "1", env=env_at(LEDGER_USD_DAILY_CAP="1e30"))
    assert "Traceback" not in result.stderr
    if result.code == 78:
        assert "LEDGER_USD_DAILY_CAP" in one_error_line(result.stderr)
    else:
        assert result.stdout, f"exit {result.code} without a decision: {result.stderr!r}"
        assert result.json()["verdict"] == "allow"


def test_real_processes_see_the_same_exit_codes(home):
    base = clean_env(LEDGER_NOW=at(), LEDGER_BILLING_STALE_HALT_PCT="100")
    allow = run_process(["--home", str(home), "verdict", "1"], env=base)
    assert allow.code == 0, allow
    assert allow.json()["verdict"] == "allow"
    halt = run_process(["--home", str(home), "verdict", "100"], env=base)
    assert halt.code == 1, halt
    assert halt.json()["verdict"] == "halt-100"
    bad = run_process(["--home", str(home), "verdict", "-5"], env=base)
    assert bad.code == 2
    assert bad.stdout == ""
    one_error_line(bad.stderr)
    config = run_process(
        ["--home", str(home), "verdict", "1"], env={**base, "LEDGER_USD_WARN_PCT": "120"}
    )
    assert config.code == 78
    assert "LEDGER_USD_WARN_PCT" in one_error_line(config.stderr)
    rec = run_process(["--home", str(home), "record", "0.5", "--provider", "openai"], env=base)
    assert rec.code == 0, rec
    assert rec.json()["recorded"] is True
    use = run_process(["--home", str(home), "usage"], env=base)
    assert use.code == 0
    assert use.json()["usd_used"] == 0.5


# --- configuration errors (exit 78) ---------------------------------------------


def test_missing_daily_cap_exits_78(tmp_path, run_inproc):
    bare = tmp_path / "bare"
    assert run_inproc(["--home", str(bare), "init"]).code == 0
    result = run_inproc(["--home", str(bare), "verdict", "1"], env_at())
    assert result.code == 78
    assert result.stdout == ""
    assert one_error_line(result.stderr).startswith("ledger: usd.daily_cap")
    assert chain_lines(bare) == []
    proc = run_process(["--home", str(bare), "verdict", "1"], env=clean_env(LEDGER_NOW=at()))
    assert proc.code == 78
    assert one_error_line(proc.stderr).startswith("ledger: usd.daily_cap")
    # the environment can supply it (env > file > default)
    fixed = run_inproc(["--home", str(bare), "verdict", "1"], env_at(LEDGER_USD_DAILY_CAP="10"))
    assert fixed.code == 0, fixed
    assert fixed.json()["daily_cap_usd"] == 10


def test_environment_overrides_the_file(ledger):
    document = verdict(ledger, "1", env=env_at(LEDGER_USD_DAILY_CAP="2"))
    assert document["daily_cap_usd"] == 2
    assert document["usage_pct"] == 50
    assert document["verdict"] == "allow"
    warn = verdict(ledger, "0", env=env_at(LEDGER_USD_DAILY_CAP="2", LEDGER_USD_WARN_PCT="50"))
    assert warn["verdict"] == "warn-90"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LEDGER_USD_DAILY_CAP", "-1"),
        ("LEDGER_USD_DAILY_CAP", "lots"),
        ("LEDGER_USD_DAILY_CAP", "nan"),
        ("LEDGER_USD_WARN_PCT", "abc"),
        ("LEDGER_USD_WARN_PCT", "101"),
        ("LEDGER_USD_WARN_PCT", "-0.5"),
        ("LEDGER_USD_RESERVATION_TTL_SECONDS", "1.5"),
        ("LEDGER_USD_RESERVATION_TTL_SECONDS", "-1"),
        ("LEDGER_USD_PROVIDER_CAPS", "not json"),
        ("LEDGER_USD_PROVIDER_CAPS", "[5]"),
        ("LEDGER_USD_PROVIDER_CAPS", '{"OpenAI": 5}'),
        ("LEDGER_USD_PROVIDER_CAPS", '{"openai": -5}'),
        ("LEDGER_USD_PROVIDER_CAPS", '{"aggregate": 5}'),
        ("LEDGER_BILLING_STALE_HALT_PCT", "200"),
        ("LEDGER_BILLING_FRESHNESS_SECONDS", "soon"),
        ("LEDGER_BILLING_CLOCK_TOLERANCE_SECONDS", "-60"),
        ("LEDGER_OBSERVER_COMMAND", "/bin/observer"),
        ("LEDGER_OBSERVER_COMMAND", "[]"),
        ("LEDGER_OBSERVER_TIMEOUT_SECONDS", "x"),
        ("LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS", "ten"),
    ],
)
def test_malformed_environment_value_exits_78_naming_the_key(ledger, home, variable, value):
    for command in (["verdict", "1"], ["record", "1", "--provider", "openai"], ["usage"]):
        result = ledger(*command, env=env_at(**{variable: value}))
        assert result.code == 78, (command, result)
        assert result.stdout == ""
        assert variable in one_error_line(result.stderr), (command, result.stderr)
    assert chain_lines(home) == []


def edit_config(home: Path, old: str, new: str) -> None:
    path = home / "ledger.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("warn_pct = 90", 'warn_pct = "ninety"', "usd.warn_pct"),
        ("warn_pct = 90", "warn_pct = 150", "usd.warn_pct"),
        ("daily_cap = 100", "daily_cap = -3", "usd.daily_cap"),
        ("stale_seconds = 900", "stale_seconds = 9.5", "billing.stale_seconds"),
        ("warn_pct = 90", "warn_pct = 90\nwarn_percent = 80", "usd.warn_percent"),
        ("[billing]", "[billing]\nfreshness = 3", "billing.freshness"),
        ("[chain]", "[chains]", "chains"),
        ("[usd]", "[usd]\nprovider_caps = { Bad = 1 }", "usd.provider_caps"),
    ],
)
def test_malformed_or_unknown_key_in_the_file_exits_78_naming_it(ledger, home, old, new, named):
    edit_config(home, old, new)
    result = ledger("verdict", "1")
    assert result.code == 78, result
    assert result.stdout == ""
    assert named in one_error_line(result.stderr)
    assert chain_lines(home) == []


def test_config_file_that_is_not_toml_exits_78(ledger, home):
    (home / "ledger.toml").write_text("[usd\ndaily_cap = = 3\n")
    result = ledger("verdict", "1")
    assert result.code == 78
    assert "ledger.toml" in one_error_line(result.stderr)


def test_unknown_ledger_variables_are_ignored(ledger):
    result = ledger("verdict", "1", env=env_at(LEDGER_USD_NOT_A_KEY="x", LEDGER_FOO="1"))
    assert result.code == 0, result


def test_malformed_ledger_now_is_a_config_error(ledger, home):
    result = ledger("verdict", "1", env={"LEDGER_NOW": "yesterday"})
    assert result.code == 78
    assert "LEDGER_NOW" in one_error_line(result.stderr)
    assert chain_lines(home) == []


# --- thresholds at their exact boundaries --------------------------------------


@STORES
def test_warn_and_halt_at_exact_boundaries(ledger):
    record(ledger, "89")
    first = verdict(ledger, "0.999999")
    assert first["verdict"] == "allow"  # projected 89.999999 %
    warn = verdict(ledger, "0.000001")
    assert warn["verdict"] == "warn-90"  # projected exactly 90 %
    assert warn["usage_pct"] == 90
    assert warn["usd_reserved_micros"] == 999_999
    assert verdict(ledger, "9.999999")["verdict"] == "warn-90"  # 99.999999 %
    halt = verdict(ledger, "0.000001")  # exactly 100 %
    assert halt["verdict"] == "halt-100"
    assert halt["usage_pct"] == 100
    assert halt["usd_remaining"] == pytest.approx(0.000001)
    record(ledger, "0.000001")  # used + reserved now exactly 100 %
    zero = verdict(ledger, "0")  # even nothing does not fit at 100 %
    assert zero["verdict"] == "halt-100"


@STORES
def test_a_100_dollar_cap_admits_99_one_dollar_calls(ledger):
    verdicts = [verdict(ledger, "1")["verdict"] for _ in range(100)]
    assert verdicts[:89] == ["allow"] * 89
    assert verdicts[89:99] == ["warn-90"] * 10
    assert verdicts[99] == "halt-100"


@STORES
def test_warn_pct_is_configurable(ledger):
    record(ledger, "49")
    assert verdict(ledger, "0.5", env=env_at(LEDGER_USD_WARN_PCT="50"))["verdict"] == "allow"
    assert verdict(ledger, "0.5", env=env_at(LEDGER_USD_WARN_PCT="50"))["verdict"] == "warn-90"


@STORES
def test_cap_zero_halts_every_call(ledger):
    env = env_at(LEDGER_USD_DAILY_CAP="0")
    for amount in ("0", "0.01", "5"):
        document = verdict(ledger, amount, env=env)
        assert document["verdict"] == "halt-100"
        assert document["usage_pct"] is None
        assert document["daily_cap_usd"] == 0
        assert document["usd_remaining"] == 0
        assert document["deciding_cap"] == "aggregate"


@STORES
def test_provider_cap_zero_halts_that_provider_only(ledger):
    env = env_at(LEDGER_USD_PROVIDER_CAPS='{"openai": 0}')
    halt = verdict(ledger, "0", "--provider", "openai", env=env)
    assert halt["verdict"] == "halt-100"
    assert halt["deciding_cap"] == "provider:openai"
    assert halt["usage_pct"] is None
    assert verdict(ledger, "1", "--provider", "anthropic", env=env)["verdict"] == "allow"


@STORES
def test_provider_sub_cap_is_checked_with_the_aggregate(ledger):
    env = env_at(LEDGER_USD_PROVIDER_CAPS='{"openai": 5}')
    record(ledger, "4", "openai", env=env)
    warn = verdict(ledger, "0.5", "--provider", "openai", env=env)
    assert warn["verdict"] == "warn-90"  # 4.5 of 5 = 90 %
    assert warn["deciding_cap"] == "provider:openai"
    assert warn["provider"] == "openai"
    assert warn["daily_cap_usd"] == 5
    assert warn["usd_used"] == 4
    assert warn["usd_remaining"] == 1
    assert warn["usage_pct"] == 90
    halt = verdict(ledger, "0.5", "--provider", "openai", env=env)  # 4 + 0.5 + 0.5 = 5
    assert halt["verdict"] == "halt-100"
    assert halt["deciding_cap"] == "provider:openai"
    assert halt["usd_reserved"] == 0.5
    assert halt["usd_remaining"] == 0.5
    assert verdict(ledger, "0.49", "--provider", "openai", env=env)["verdict"] == "warn-90"
    # another provider only meets the aggregate
    other = verdict(ledger, "1", "--provider", "anthropic", env=env)
    assert other["verdict"] == "allow"
    assert other["deciding_cap"] == "aggregate"
    assert other["daily_cap_usd"] == 100
    assert other["usd_used"] == 4
    assert other["usd_reserved"] == pytest.approx(0.99)


@STORES
def test_aggregate_cap_halts_a_provider_below_its_sub_cap(ledger):
    env = env_at(LEDGER_USD_PROVIDER_CAPS='{"openai": 50}')
    record(ledger, "95", "anthropic", env=env)
    halt = verdict(ledger, "5", "--provider", "openai", env=env)
    assert halt["verdict"] == "halt-100"
    assert halt["deciding_cap"] == "aggregate"
    assert halt["daily_cap_usd"] == 100
    warn = verdict(ledger, "4", "--provider", "openai", env=env)
    assert warn["verdict"] == "warn-90"
    assert warn["deciding_cap"] == "aggregate"
    assert warn["usage_pct"] == 99
    # with several sub-caps the highest projected % decides
    env2 = env_at(LEDGER_USD_PROVIDER_CAPS='{"openai": 50, "mistral": 2}')
    own = verdict(ledger, "1.8", "--provider", "mistral", env=env2)
    assert own["deciding_cap"] == "aggregate"  # 99 + 1.8 ≥ 100 beats 90 % of 2
    assert own["verdict"] == "halt-100"


@STORES
def test_usd_remaining_is_cap_minus_used_minus_reserved(ledger):
    verdict(ledger, "10")
    record(ledger, "5", "openai")
    document = verdict(ledger, "1")
    assert document["usd_used"] == 5
    assert document["usd_reserved"] == 10
    assert document["usd_remaining"] == 85
    assert document["usd_used_micros"] == 5_000_000
    assert document["usd_reserved_micros"] == 10_000_000
    assert document["usage_pct"] == 16
    assert usage(ledger)["usd_remaining"] == 84


@STORES
def test_only_admitted_verdicts_reserve(ledger, home):
    record(ledger, "95")
    halt = verdict(ledger, "10")
    assert halt["verdict"] == "halt-100"
    assert chain_entries(home)[-1]["event_type"] == "budget.halt_100"
    assert chain_entries(home)[-1]["payload"]["reservation"] is None
    assert usage(ledger)["usd_reserved"] == 0
    fits = verdict(ledger, "4")
    assert fits["verdict"] == "warn-90"
    assert fits["usd_reserved"] == 0
    assert usage(ledger)["usd_reserved"] == 4
    assert verdict(ledger, "1")["verdict"] == "halt-100"  # 95 + 4 + 1


# --- reservations ---------------------------------------------------------------


@STORES
def test_record_with_verdict_ref_settles_the_reservation(ledger):
    ref = verdict(ledger, "10")["verdict_ref"]
    assert usage(ledger)["usd_reserved"] == 10
    result = ledger("record", "7", "--provider", "openai", "--verdict-ref", ref)
    assert result.code == 0
    assert result.stderr == ""
    assert result.json()["settled"] is True
    after = usage(ledger)
    assert after["usd_reserved"] == 0
    assert after["usd_used"] == 7
    # settling twice: recorded anyway, with a warning
    again = ledger("record", "7", "--provider", "openai", "--verdict-ref", ref)
    assert again.code == 0
    assert again.json()["settled"] is False
    assert "warning" in one_error_line(again.stderr)
    assert usage(ledger)["usd_used"] == 14


@STORES
def test_unknown_verdict_ref_is_recorded_with_a_warning(ledger, home):
    result = ledger("record", "1", "--provider", "openai", "--verdict-ref", "ab" * 32)
    assert result.code == 0
    assert result.json()["recorded"] is True
    assert result.json()["settled"] is False
    line = one_error_line(result.stderr)
    assert "warning" in line
    assert "unknown" in line
    assert usage(ledger)["usd_used"] == 1
    # a halt reserves nothing, so its ref settles nothing either
    record(ledger, "95")
    halt_ref = verdict(ledger, "10")["verdict_ref"]
    late = ledger("record", "2", "--provider", "openai", "--verdict-ref", halt_ref)
    assert late.code == 0
    assert "warning" in one_error_line(late.stderr)
    assert usage(ledger)["usd_used"] == 98


@STORES
def test_expired_verdict_ref_is_recorded_with_a_warning(ledger):
    ttl = {"LEDGER_USD_RESERVATION_TTL_SECONDS": "60"}
    ref = verdict(ledger, "10", env=env_at(0, **ttl))["verdict_ref"]
    result = ledger(
        "record", "9", "--provider", "openai", "--verdict-ref", ref, env=env_at(61, **ttl)
    )
    assert result.code == 0
    assert result.json()["recorded"] is True
    assert result.json()["settled"] is False
    line = one_error_line(result.stderr)
    assert "expired" in line
    after = usage(ledger, env=env_at(62, **ttl))
    assert after["usd_used"] == 9
    assert after["usd_reserved"] == 0


@STORES
def test_reservations_expire_after_their_ttl(ledger):
    ttl = {"LEDGER_USD_RESERVATION_TTL_SECONDS": "60"}
    verdict(ledger, "50", env=env_at(0, **ttl))
    assert usage(ledger, env=env_at(59, **ttl))["usd_reserved"] == 50
    assert verdict(ledger, "50", env=env_at(59, **ttl))["verdict"] == "halt-100"
    assert usage(ledger, env=env_at(61, **ttl))["usd_reserved"] == 0
    after = verdict(ledger, "95", env=env_at(61, **ttl))
    assert after["verdict"] == "warn-90"
    assert after["usd_reserved"] == 0


@STORES
def test_default_ttl_is_900_seconds(ledger):
    verdict(ledger, "50")
    assert usage(ledger, env=env_at(899))["usd_reserved"] == 50
    assert usage(ledger, env=env_at(901))["usd_reserved"] == 0


# --- the UTC day ------------------------------------------------------------------


@STORES
def test_yesterdays_spend_and_reservations_stop_counting_at_midnight(ledger):
    evening = 11 * 3600 + 50 * 60  # 23:50:00
    record(ledger, "60", env=env_at(evening))
    warn = verdict(ledger, "30", env=env_at(evening + 60))
    assert warn["verdict"] == "warn-90"
    before = usage(ledger, env=env_at(12 * 3600 - 0.000001))  # 23:59:59.999999
    assert (before["usd_used"], before["usd_reserved"], before["utc_day"]) == (60, 30, DAY)
    midnight = usage(ledger, env=env_at(12 * 3600))
    assert midnight["utc_day"] == "2026-03-02"
    assert midnight["usd_used"] == 0
    assert midnight["usd_reserved"] == 0
    assert midnight["usd_remaining"] == 100
    assert midnight["counter_age_seconds"] is None
    fresh = verdict(ledger, "99", env=env_at(12 * 3600 + 1))
    assert fresh["verdict"] == "warn-90"
    assert fresh["utc_day"] == "2026-03-02"
    assert fresh["usd_used"] == 0
    assert verdict(ledger, "1", env=env_at(12 * 3600 + 2))["verdict"] == "halt-100"


# --- used = max(local counter, billing) ---------------------------------------------


@STORES
def test_fresh_billing_never_hides_a_higher_local_count(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(10, at(-60))
    env0 = env_at(0, cap_only=False, **observer.env)
    record(ledger, "80", env=env0)
    low = verdict(ledger, "1", env=env0)
    assert low["verdict"] == "allow"
    assert low["usd_used"] == 80  # billing says 10, the local counter 80
    assert low["billing_api_age_seconds"] == 0
    assert len(observer.calls()) == 1
    # a later, higher bill wins over the counter
    observer.answer(88, at(340))
    high = verdict(ledger, "1", env=env_at(400, cap_only=False, **observer.env))
    assert len(observer.calls()) == 2  # the first reading was 400 s old (> 300)
    assert high["usd_used"] == 88
    assert high["usd_reserved"] == 1
    assert high["usd_remaining"] == 11
    assert high["verdict"] == "warn-90"
    assert high["usage_pct"] == 90
    assert usage(ledger, env=env_at(401, cap_only=False, **observer.env))["usd_used"] == 88


# --- usage is read-only -------------------------------------------------------------


def test_usage_changes_no_byte_in_the_home(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(77, at(-5))
    caps = {"LEDGER_USD_PROVIDER_CAPS": '{"openai": 90}', **observer.env}
    record(ledger, "76", "openai", env=env_at(0, cap_only=False, **caps))
    verdict(ledger, "1", "--provider", "openai", env=env_at(0, cap_only=False, **caps))
    assert events_of(home, "budget.observation")
    before = home_files(home)
    calls = len(observer.calls())
    for seconds in (0, 500, 2000, 86_400):
        env = env_at(seconds, cap_only=False, **caps)
        for args in ([], ["--provider", "openai"], ["--provider", "anthropic"]):
            usage(ledger, *args, env=env)
    assert home_files(home) == before
    assert len(observer.calls()) == calls  # usage never runs the observer
    # also while the derived state is missing or behind the chain
    state_path(home).unlink()
    before = home_files(home)
    usage(ledger)
    assert home_files(home) == before
    ok(ledger("rebuild-state"))
    append_raw_entry(home, env_at(), "budget.record_call", record_payload(1_000_000, DAY), BASE)
    before = home_files(home)
    assert usage(ledger)["usd_used"] == 77
    assert home_files(home) == before


def test_usage_on_a_fresh_home_creates_no_file(ledger, home):
    before = home_files(home)
    usage(ledger)
    usage(ledger, "--provider", "openai")
    assert home_files(home) == before


# --- every row of SPEC §4 ---------------------------------------------------------


def test_row1_counter_inconsistent_from_an_edited_state_file(ledger, home):
    verdict(ledger, "1")
    path = state_path(home)
    path.write_bytes(path.read_bytes().replace(b'"entries":1', b'"entries":7', 1))
    halt = verdict(ledger, "1")
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "counter_inconsistent"
    assert "rebuild-state" in halt["diagnostic"]
    assert usage(ledger)["uncertainty_reason"] == "counter_inconsistent"


@STORES
def test_row1_counter_inconsistent_from_a_timestamp_stepping_back(ledger, home):
    verdict(ledger, "1", env=env_at(0))
    # a writer whose clock ran 61 s behind (beyond clock_tolerance_seconds = 60)
    append_raw_entry(
        home, env_at(), "budget.record_call", record_payload(1_000_000, DAY),
        BASE - dt.timedelta(seconds=61),
    )  # fmt: skip
    halt = verdict(ledger, "1", env=env_at(10))
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "counter_inconsistent"
    assert "earlier than the entry before it" in halt["diagnostic"]
    # until an operator rebuilds the state
    assert verdict(ledger, "1", env=env_at(20))["uncertainty_reason"] == "counter_inconsistent"
    assert ledger("rebuild-state", env=env_at(30)).code == 0
    assert verdict(ledger, "1", env=env_at(40))["verdict"] == "allow"


@STORES
def test_row1_a_backstep_within_tolerance_is_not_a_halt(ledger, home):
    verdict(ledger, "1", env=env_at(0))
    append_raw_entry(
        home, env_at(), "budget.record_call", record_payload(1_000_000, DAY),
        BASE - dt.timedelta(seconds=60),
    )  # fmt: skip
    assert verdict(ledger, "1", env=env_at(10))["verdict"] == "allow"


@STORES
def test_row1_counter_inconsistent_from_a_negative_amount(ledger, home):
    verdict(ledger, "1")
    append_raw_entry(
        home, env_at(), "budget.record_call", record_payload(-50_000_000, DAY), BASE,
        validate=False,
    )  # fmt: skip
    halt = verdict(ledger, "1")
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "counter_inconsistent"
    assert "negative" in halt["diagnostic"]


@STORES
def test_row2_counter_drift_until_reconciled(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    obs = observer.env
    record(ledger, "10", env=env_at(0, **obs))
    observer.answer(50, at(-30))
    blocker = ledger("reconcile", env=env_at(10, **obs))
    assert blocker.code == 1, blocker
    assert blocker.json()["blocking"] is True
    halt = verdict(ledger, "1", env=env_at(20, **obs))
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "counter_drift"
    assert "reconcile" in halt["diagnostic"]
    assert halt["verdict_ref"] is not None
    assert chain_entries(home)[-1]["event_type"] == "budget.halt_uncertainty"
    # a later reconcile within the threshold clears it
    observer.answer(50.5, at(0))
    record(ledger, "40", env=env_at(30, **obs))
    assert ledger("reconcile", env=env_at(40, **obs)).code == 0
    cleared = verdict(ledger, "1", env=env_at(50, **obs))
    assert cleared["verdict"] == "allow"
    assert cleared["usd_used"] == 50.5  # the bill is higher than the counter (50)
    # a new blocker, then an operator's forced re-base
    observer.answer(70, at(50))
    assert ledger("reconcile", env=env_at(60, **obs)).code == 1
    assert verdict(ledger, "1", env=env_at(70, **obs))["uncertainty_reason"] == "counter_drift"
    forced = ledger("reconcile", "--force-reason", "checked the invoice", env=env_at(80, **obs))
    assert forced.code == 0, forced
    after = verdict(ledger, "1", env=env_at(90, **obs))
    assert after["verdict"] == "allow"
    assert after["usd_used"] == 70
    assert usage(ledger, env=env_at(91, **obs))["usd_used"] == 70


@STORES
def test_row3_billing_stale_without_an_observer(ledger):
    stale = env_at(cap_only=False)
    record(ledger, "75", env=stale)
    at_limit = verdict(ledger, "0", env=stale)  # usage exactly 75 %: not above
    assert at_limit["verdict"] == "allow"
    record(ledger, "0.000001", env=stale)
    halt = verdict(ledger, "0", env=stale)
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "billing_stale"
    assert halt["billing_api_age_seconds"] is None
    # the estimate does not count towards "usage %": 75 % plus a big estimate is a cap question
    record_env = env_at(cap_only=False, LEDGER_BILLING_STALE_HALT_PCT="80")
    assert verdict(ledger, "25", env=record_env)["verdict"] == "halt-100"
    assert verdict(ledger, "20", env=record_env)["verdict"] == "warn-90"


@STORES
def test_row3_billing_stale_with_an_unreachable_observer(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    env = env_at(cap_only=False, **observer.env)
    record(ledger, "80", env=env)
    halt = verdict(ledger, "1", env=env)
    assert halt["uncertainty_reason"] == "billing_stale"
    assert observer.calls() == ["aggregate lock-free"]
    observations = events_of(home, "budget.observation")
    assert len(observations) == 1
    assert observations[0]["payload"]["ok"] is False
    assert observations[0]["payload"]["reason"]


@STORES
def test_row3_billing_stale_when_the_last_reading_is_too_old(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(80, at(-10))
    record(ledger, "80", env=env_at(0, cap_only=False, **observer.env))
    assert verdict(ledger, "1", env=env_at(0, cap_only=False, **observer.env))["verdict"] == "allow"
    observer.fail()
    # 900 s later the reading is not stale yet (limit: > stale_seconds)
    ok900 = verdict(ledger, "1", env=env_at(900, cap_only=False, **observer.env))
    assert ok900["verdict"] == "allow"
    assert ok900["billing_api_age_seconds"] == 900
    halt = verdict(ledger, "1", env=env_at(901, cap_only=False, **observer.env))
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "billing_stale"
    assert halt["billing_api_age_seconds"] == 901
    assert len(observer.calls()) == 3


@STORES
def test_row4_provider_lag(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(80, at(-300))  # billing data 300 s behind its fetch time
    env = env_at(0, cap_only=False, **observer.env)
    record(ledger, "80", env=env)
    halt = verdict(ledger, "1", env=env)
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "provider_lag"
    assert halt["billing_api_age_seconds"] == 0
    observer.answer(80, at(400 - 299))
    later = verdict(ledger, "1", env=env_at(400, cap_only=False, **observer.env))
    assert later["verdict"] == "allow"


@STORES
def test_row4_lag_below_stale_halt_pct_does_not_halt(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(70, at(-3600))
    env = env_at(0, cap_only=False, **observer.env)
    record(ledger, "76", env=env)
    assert verdict(ledger, "1", env=env)["uncertainty_reason"] == "provider_lag"
    # a lagging bill halts only above stale_halt_pct
    low = env_at(0, cap_only=False, LEDGER_BILLING_STALE_HALT_PCT="90", **observer.env)
    assert verdict(ledger, "1", env=low)["verdict"] == "allow"


@STORES
def test_row5_clock_drift_from_the_providers_server_ts(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(80, at(-10), server_ts=at(61))
    env = env_at(0, cap_only=False, **observer.env)
    record(ledger, "80", env=env)
    halt = verdict(ledger, "1", env=env)
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "clock_drift"
    observer.answer(80, at(390), server_ts=at(400 - 60))
    fine = verdict(ledger, "1", env=env_at(400, cap_only=False, **observer.env))
    assert fine["verdict"] == "allow", fine


@STORES
def test_row5_clock_drift_from_a_billing_ts_in_the_future(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(80, at(61))
    env = env_at(0, cap_only=False, **observer.env)
    record(ledger, "80", env=env)
    halt = verdict(ledger, "1", env=env)
    assert halt["uncertainty_reason"] == "clock_drift"


@STORES
def test_row5_clock_drift_when_now_is_before_the_chain_head(ledger, home):
    first = verdict(ledger, "1", env=env_at(0))
    head_ts = chain_entries(home)[-1]["ts_utc"]
    assert head_ts == "2026-03-01T12:00:00.000000Z"
    halt = verdict(ledger, "1", env=env_at(-61))
    assert halt["verdict"] == "halt-uncertainty"
    assert halt["uncertainty_reason"] == "clock_drift"
    assert halt["verdict_ref"] != first["verdict_ref"]
    entry = chain_entries(home)[-1]
    assert entry["event_type"] == "budget.halt_uncertainty"
    assert entry["ts_utc"] == head_ts  # sealed with the head's time, not earlier
    assert entry["payload"]["local_time"] == "2026-03-01T11:58:59.000000Z"
    assert "2026-03-01T11:58:59" in halt["diagnostic"]
    # within tolerance: admitted, still sealed at the head's time
    fine = verdict(ledger, "1", env=env_at(-60))
    assert fine["verdict"] == "allow"
    assert chain_entries(home)[-1]["ts_utc"] == head_ts
    times = [e["ts_utc"] for e in chain_entries(home)]
    assert times == sorted(times)
    assert ledger("verify-chain").code == 0


@STORES
def test_row6_and_row7_and_row8(ledger):
    assert verdict(ledger, "89")["verdict"] == "allow"
    assert verdict(ledger, "1")["verdict"] == "warn-90"
    assert verdict(ledger, "10")["verdict"] == "halt-100"


def test_uncertainty_outranks_the_cap(ledger, home):
    # row 1 before row 6: an untrusted counter never says halt-100
    record(ledger, "100")
    path = state_path(home)
    path.write_bytes(path.read_bytes().replace(b"100000000", b"100000001", 1))
    assert verdict(ledger, "1")["verdict"] == "halt-uncertainty"


# --- the verdict runs the observer itself ----------------------------------------------


@STORES
def test_verdict_refreshes_the_reading_through_the_observer(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(42.5, at(-30), server_ts=at(2))
    obs = observer.env
    record(ledger, "50", env=env_at(0, cap_only=False, **obs))
    below = verdict(ledger, "1", env=env_at(0, cap_only=False, **obs))
    assert below["verdict"] == "allow"
    assert observer.calls() == []  # at 50 % no reading is needed
    record(ledger, "30", env=env_at(1, cap_only=False, **obs))
    first = verdict(ledger, "1", env=env_at(2, cap_only=False, **obs))
    assert first["verdict"] == "allow"
    assert first["billing_api_age_seconds"] == 0
    # the observer ran once, for the aggregate, while the chain lock was free
    assert observer.calls() == ["aggregate lock-free"]
    entries = chain_entries(home)
    assert [e["event_type"] for e in entries[-2:]] == ["budget.observation", "budget.allow"]
    payload = entries[-2]["payload"]
    assert payload["ok"] is True
    assert payload["provider"] == "aggregate"
    assert payload["usd_used_micros"] == 42_500_000
    assert payload["fetched_at"] == "2026-03-01T12:00:02.000000Z"
    assert payload["billing_ts"] == "2026-03-01T11:59:30.000000Z"
    assert payload["server_ts"] == "2026-03-01T12:00:02.000000Z"
    assert payload.get("source") == "verdict"
    # fresh for freshness_seconds (300): not run again
    again = verdict(ledger, "1", env=env_at(302, cap_only=False, **obs))
    assert again["billing_api_age_seconds"] == 300
    assert len(observer.calls()) == 1
    observer.answer(43, at(300), server_ts=at(303))
    third = verdict(ledger, "1", env=env_at(303, cap_only=False, **obs))
    assert len(observer.calls()) == 2
    assert third["billing_api_age_seconds"] == 0
    assert len(events_of(home, "budget.observation")) == 2
    assert ledger("verify-chain").code == 0


@STORES
def test_verdict_asks_the_observer_about_the_provider_near_its_sub_cap(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(8, at(-5))
    env = env_at(0, cap_only=False, LEDGER_USD_PROVIDER_CAPS='{"openai": 10}', **observer.env)
    record(ledger, "8", "openai", env=env)
    document = verdict(ledger, "1", "--provider", "openai", env=env)
    assert document["verdict"] == "warn-90"
    assert document["deciding_cap"] == "provider:openai"
    assert observer.calls() == ["openai lock-free"]
    assert events_of(home, "budget.observation")[-1]["payload"]["provider"] == "openai"


@STORES
def test_a_deferring_observer_writes_no_observation(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer_path.write_text(json.dumps({"_defer": True, "_reason": "rate_limited"}))
    env = env_at(0, cap_only=False, **observer.env)
    record(ledger, "80", env=env)
    halt = verdict(ledger, "1", env=env)
    assert halt["uncertainty_reason"] == "billing_stale"
    assert events_of(home, "budget.observation") == []
    assert len(observer.calls()) == 1


# --- ages --------------------------------------------------------------------------


@STORES
def test_counter_age_and_billing_age(ledger, home, tmp_path):
    caps = {"LEDGER_USD_PROVIDER_CAPS": '{"openai": 10}'}
    assert verdict(ledger, "1", env=env_at(0, **caps))["counter_age_seconds"] is None
    record(ledger, "1", "openai", env=env_at(0, **caps))
    record(ledger, "1", "anthropic", env=env_at(10, **caps))
    aggregate = verdict(ledger, "0", env=env_at(42.5, **caps))
    assert aggregate["counter_age_seconds"] == 32.5
    assert aggregate["billing_api_age_seconds"] is None
    own = verdict(ledger, "0", "--provider", "openai", env=env_at(42.5, **caps))
    assert own["deciding_cap"] == "provider:openai"
    assert own["counter_age_seconds"] == 42.5
    # billing age counts from when the reading was fetched
    observer = Observer(tmp_path / "obs", home)
    observer.answer(80, at(0))
    obs = {**caps, **observer.env}
    record(ledger, "78", "mistral", env=env_at(50, cap_only=False, **obs))
    verdict(ledger, "0", env=env_at(60, cap_only=False, **obs))
    later = verdict(ledger, "0", env=env_at(160.25, cap_only=False, **obs))
    assert later["billing_api_age_seconds"] == 100.25
    assert later["counter_age_seconds"] == 110.25
    use = usage(ledger, env=env_at(170, cap_only=False, **obs))
    assert use["billing_api_age_seconds"] == 110
    assert use["counter_age_seconds"] == 120
    assert len(observer.calls()) == 1


@STORES
def test_chain_verifies_after_a_busy_day(ledger, home, tmp_path):
    observer = Observer(tmp_path / "obs", home)
    observer.answer(60, at(0))
    obs = observer.env
    for i in range(20):
        ref = verdict(ledger, "4", env=env_at(i * 10, cap_only=False, **obs))["verdict_ref"]
        record(
            ledger,
            "3.9",
            "openai",
            "--verdict-ref",
            ref,
            env=env_at(i * 10 + 5, cap_only=False, **obs),
        )
    result = ledger("verify-chain", env=env_at(1000))
    assert result.code == 0, result
    assert result.stdout.strip() == f"OK {len(chain_lines(home))} entries"
