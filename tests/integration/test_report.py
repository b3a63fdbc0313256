"""ledger report: one budget day from the verified chain (SPEC §10)."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env
from tests.gate_helpers import Observer, append_raw_entry, record_payload

DAY = "2026-03-02"
BASE = {"LEDGER_USD_PROVIDER_CAPS": '{"openai": 40}', "LEDGER_BILLING_STALE_HALT_PCT": "100"}


def at(clock: str, day: str = DAY) -> dict[str, str]:
    return {**BASE, "LEDGER_NOW": f"{day}T{clock}Z"}


class Day:
    """Runs commands against one home at given times of the scripted day."""

    def __init__(self, run, home: Path, observer: Observer, **extra: str) -> None:
        self.run, self.home, self.observer, self.extra = run, home, observer, extra

    def __call__(self, clock: str, *args: str, code: int = 0, day: str = DAY) -> Any:
        env = {**at(clock, day), **self.observer.env, **self.extra}
        result = self.run(["--home", str(self.home), *args], env=env)
        assert result.code == code, (args, result.stdout, result.stderr)
        return result.json() if result.stdout.startswith("{") else result


@pytest.fixture
def scripted(home, run_inproc, tmp_path: Path) -> Day:
    """A day of verdicts, records on two providers, a drifting and a forced reconcile.

    openai: 4.25 (settling a verdict) + 7.75 = 12.00; anthropic: 12 + 2.000001;
    the bill says 30.00 at 05:00 against a counter of 24.00 (drift 20 %, a
    blocker), and a forced reconcile at 07:00 re-bases the aggregate by +6.00.
    """
    observer = Observer(tmp_path / "observer", home)
    day = Day(run_inproc, home, observer)
    day("23:00:00", "record", "50", "--provider", "openai", day="2026-03-01")  # the day before
    ref = day("01:00:00", "verdict", "5", "--provider", "openai")["verdict_ref"]
    day("01:05:00", "record", "4.25", "--provider", "openai", "--verdict-ref", ref)
    day("02:00:00", "record", "12", "--provider", "anthropic")
    day("03:00:00", "record", "7.75", "--provider", "openai")
    halted = day("04:00:00", "verdict", "30", "--provider", "openai", code=1)
    assert halted["verdict"] == "halt-100"
    observer.answer(30, f"{DAY}T04:59:00Z")
    assert day("05:00:00", "reconcile", code=1)["status"] == "blocker"
    drifted = day("06:00:00", "verdict", "1", code=1)
    assert drifted["uncertainty_reason"] == "counter_drift"
    day("07:00:00", "reconcile", "--force-reason", "late invoices")
    day("08:00:00", "record", "2.000001", "--provider", "anthropic")
    day("09:00:00", "verdict", "10", "--provider", "anthropic")
    return day


def report(day: Day, clock: str, *args: str, on: str = DAY) -> dict[str, Any]:
    document: dict[str, Any] = day(clock, "report", "--json", *args, day=on)
    return document


def scope(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in document["scopes"] if s["scope"] == name)
    return found


def test_todays_figures_match_the_hand_computed_micros(scripted):
    """Spend per provider, the re-base, the bill, reservations, verdicts and reconciles."""
    doc = report(scripted, "09:05:00")
    assert doc["budget_day"] == DAY
    assert doc["timezone"] == "UTC"
    assert doc["day_start"] == f"{DAY}T00:00:00.000000Z"
    assert doc["day_end"] == "2026-03-03T00:00:00.000000Z"
    assert doc["counter"] == {"trusted": True, "uncertainty_reason": None, "diagnostic": None}
    aggregate = scope(doc, "aggregate")
    assert aggregate["cap_micros"] == 100_000_000
    assert aggregate["counter_micros"] == 32_000_001  # 12 + 14.000001 + a 6.00 re-base
    assert aggregate["billing_micros"] == 30_000_000
    assert aggregate["used_micros"] == 32_000_001
    assert aggregate["reserved_micros"] == 10_000_000  # the 09:00 verdict, live until 09:15
    assert aggregate["remaining_micros"] == 57_999_999
    assert aggregate["usage_pct"] == "42.0000"
    assert aggregate["records"] == 4
    assert aggregate["series"] == [
        [f"{DAY}T00:00:00.000000Z", 0],
        [f"{DAY}T01:05:00.000000Z", 4_250_000],
        [f"{DAY}T02:00:00.000000Z", 16_250_000],
        [f"{DAY}T03:00:00.000000Z", 24_000_000],
        [f"{DAY}T07:00:00.000000Z", 30_000_000],
        [f"{DAY}T08:00:00.000000Z", 32_000_001],
    ]
    openai = scope(doc, "provider:openai")
    assert (openai["cap_micros"], openai["used_micros"], openai["records"]) == (
        40_000_000,
        12_000_000,
        2,
    )
    assert openai["remaining_micros"] == 28_000_000
    assert openai["series"] == [
        [f"{DAY}T00:00:00.000000Z", 0],
        [f"{DAY}T01:05:00.000000Z", 4_250_000],
        [f"{DAY}T03:00:00.000000Z", 12_000_000],
    ]
    anthropic = scope(doc, "provider:anthropic")
    assert anthropic["cap_micros"] is None
    assert anthropic["usage_pct"] is None
    assert anthropic["used_micros"] == 14_000_001
    assert anthropic["reserved_micros"] == 10_000_000
    assert anthropic["series"][-1] == [f"{DAY}T08:00:00.000000Z", 14_000_001]
    assert doc["verdicts"] == {
        "total": 4,
        "by_outcome": {"allow": 2, "halt-100": 1, "halt-uncertainty": 1},
        "by_reason": [
            {"verdict": "allow", "uncertainty_reason": None, "count": 2},
            {"verdict": "halt-100", "uncertainty_reason": None, "count": 1},
            {"verdict": "halt-uncertainty", "uncertainty_reason": "counter_drift", "count": 1},
        ],
    }
    assert [(h["ts_utc"][11:19], h["verdict"], h["deciding_cap"]) for h in doc["halts"]] == [
        ("04:00:00", "halt-100", "provider:openai"),
        ("06:00:00", "halt-uncertainty", "aggregate"),
    ]
    blocker, forced = doc["reconciles"]
    assert blocker["counter_micros"] == 24_000_000
    assert blocker["billing_micros"] == 30_000_000
    assert blocker["drift_pct"] == "20.0000"
    assert blocker["blocking"] is True
    assert blocker["rebase_micros"] is None
    assert forced["forced"] is True
    assert forced["force_reason"] == "late invoices"
    assert forced["rebase_micros"] == 6_000_000
    assert forced["blocking"] is False
    assert doc["agents"]["convoys"] == []


def test_a_past_day_is_read_as_the_fold_held_it(scripted):
    """The next day's spend is not counted; reservations have lapsed; the day before is apart."""
    scripted("00:30:00", "record", "1", "--provider", "openai", day="2026-03-03")
    scripted("12:00:00", "record", "1", "--provider", "openai", day="2026-03-04")
    doc = report(scripted, "13:00:00", "--day", DAY, on="2026-03-04")
    aggregate = scope(doc, "aggregate")
    assert aggregate["counter_micros"] == 32_000_001
    assert aggregate["reserved_micros"] == 0
    assert aggregate["remaining_micros"] == 67_999_999
    assert aggregate["billing_micros"] == 30_000_000
    assert doc["verdicts"]["total"] == 4
    before = report(scripted, "13:00:00", "--day", "2026-03-01", on="2026-03-04")
    assert scope(before, "provider:openai")["used_micros"] == 50_000_000
    assert before["verdicts"]["total"] == 0
    assert before["reconciles"] == []


def test_a_record_settling_before_midnight_counts_on_its_verdicts_day(home, run_inproc, tmp_path):
    """SPEC §4: admitted at 23:59, recorded at 00:01 — the spend and the point stay on the day."""
    day = Day(run_inproc, home, Observer(tmp_path / "observer", home))
    ref = day("23:59:00", "verdict", "3", "--provider", "openai")["verdict_ref"]
    day("00:01:00", "record", "2.5", "--provider", "openai", "--verdict-ref", ref, day="2026-03-03")
    doc = report(day, "00:02:00", "--day", DAY, on="2026-03-03")
    assert scope(doc, "aggregate")["series"][-1] == ["2026-03-03T00:01:00.000000Z", 2_500_000]
    assert scope(doc, "provider:openai")["records"] == 1
    today = report(day, "00:02:00", on="2026-03-03")
    assert today["budget_day"] == "2026-03-03"
    assert scope(today, "aggregate")["counter_micros"] == 0


def test_text_table_for_people(scripted):
    """Without --json: the scopes, verdicts and reconciles as tables, money as status shows it."""
    result = scripted("09:05:00", "report")
    text = result.stdout
    assert text.startswith(f"Budget day {DAY} (UTC: ")
    assert "Counter: trusted" in text
    assert "$32.00 " in text
    assert "$32.000001" not in text
    assert "halt-uncertainty  counter_drift" in text
    assert "forced, re-based $6.00: late invoices" in text
    assert "20.0%" in text
    assert "0000%" not in text


def test_counter_damage_is_reported_as_the_gates_halt(home, run_inproc, tmp_path):
    """A verified entry that steps back in time: reported as counter_inconsistent, exit 0."""
    day = Day(run_inproc, home, Observer(tmp_path / "observer", home))
    day("10:00:00", "record", "1", "--provider", "openai")
    import datetime as dt

    append_raw_entry(home, at("10:00:00"), "budget.record_call", record_payload(1_000_000, DAY),
                     dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC))  # fmt: skip
    doc = report(day, "10:05:00")
    assert doc["counter"]["trusted"] is False
    assert doc["counter"]["uncertainty_reason"] == "counter_inconsistent"
    assert "earlier than the entry before it" in doc["counter"]["diagnostic"]


def test_a_chain_that_does_not_verify_is_one_error_line(scripted, home):
    """An edited line: exit 1, one ledger: line naming it, nothing on stdout."""
    path = home / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"actual_micros":4250000', b'"actual_micros":1250000')
    path.write_bytes(b"".join(lines))
    result = scripted("09:05:00", "report", "--json", code=1)
    assert result.stdout == ""
    assert result.stderr.startswith("ledger: BROKEN line 3: ")
    assert result.stderr.count("\n") == 1


def test_a_chain_cut_below_its_checkpoint_is_an_error(scripted, home):
    """A checkpoint vouches for more entries than the chain holds: exit 1."""
    scripted("09:01:00", "checkpoint")
    path = home / "events.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    result = scripted("09:05:00", "report", code=1)
    assert "checkpoint" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("bad", ["2026-3-2", "2026-02-30", "yesterday", "20260302"])
def test_a_malformed_day_is_a_usage_error(home, run_inproc, bad):
    result = run_inproc(["--home", str(home), "report", "--day", bad], env=at("10:00:00"))
    assert result.code == 2
    assert result.stderr.startswith("ledger: --day: ")


def test_html_without_the_extra_says_which_to_install(home, run_inproc, monkeypatch, tmp_path):
    """--html when matplotlib cannot be imported: exit 1, one line naming spend-ledger[report]."""
    monkeypatch.setitem(sys.modules, "ledger.integrations.report_html", None)
    page = tmp_path / "r.html"
    result = run_inproc(["--home", str(home), "report", "--html", str(page)], env=at("10:00:00"))
    assert result.code == 1
    assert "spend-ledger[report]" in result.stderr
    assert not page.exists()


def test_matplotlib_stays_off_the_per_call_path_and_plain_reports(home):
    """verdict, record and a report without --html never import matplotlib."""
    code = (
        "import sys\nfrom ledger.cli import main\n"
        "for args in (['verdict', '1'], ['record', '1', '--provider', 'openai'], ['report']):\n"
        "    try:\n        main(['--home', sys.argv[1], *args])\n"
        "    except SystemExit:\n        pass\n"
        "print('MPL', 'matplotlib' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(home)], capture_output=True, text=True, check=True,
        env=clean_env(LEDGER_NOW=f"{DAY}T10:00:00Z"), timeout=120,
    )  # fmt: skip
    assert out.stdout.strip().endswith("MPL False")


def test_json_is_one_object(scripted):
    """--json prints exactly one JSON object and a newline."""
    result = scripted.run(["--home", str(scripted.home), "report", "--json"], env=at("09:05:00"))
    assert result.stdout.count("\n") == 1
    assert isinstance(json.loads(result.stdout), dict)
