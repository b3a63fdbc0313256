"""Budgets as users write them, through ``ledger verdict`` / ``record`` and the Python API."""

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env, run_process
from tests.gate_helpers import state_path

FIVE_TOML = """
[[budgets]]
name = "claude-session"
usd = 5
period = "day"
per = "session"

[[budgets]]
name = "research-monthly"
usd = 200
period = "month"
match = { agent = "research-*" }

[[budgets]]
name = "opus-weekly"
usd = 50
period = "week"
match = { model = "claude-opus-*" }

[[budgets]]
name = "burst"
usd = 20
period = "rolling:5h"

[[budgets]]
name = "ci-key"
usd = 10
period = "day"
match = { key = "ci" }
"""

CAP_ENV = {"LEDGER_BILLING_STALE_HALT_PCT": "100", "LEDGER_USD_DAILY_CAP": "100000"}


class Book:
    """Commands against one home at a given UTC time."""

    def __init__(self, run, home: Path, **extra: str) -> None:
        self.run, self.home, self.extra = run, home, extra

    def __call__(self, when: str, *args: str, code: int | None = 0) -> Any:
        env = {"LEDGER_NOW": when, **CAP_ENV, **self.extra}
        result = self.run(["--home", str(self.home), *args], env=env)
        if code is not None:
            assert result.code == code, (args, result.stdout, result.stderr)
        return result.json() if result.stdout.startswith("{") else result

    def verdict(self, when: str, usd: str, *args: str) -> dict[str, Any]:
        result = self(when, "verdict", usd, "--provider", "anthropic", *args, code=None)
        return dict(result)


def with_budgets(home: Path, text: str = FIVE_TOML) -> None:
    config = home / "ledger.toml"
    config.write_text(config.read_text() + text)


def shown(document: dict[str, Any]) -> dict[str, tuple[float, float]]:
    return {
        b["name"] + (f"[{b['per_value']}]" if "per_value" in b else ""): (b["used"], b["reserved"])
        for b in document["budgets"]
    }


def test_each_claude_code_session_at_most_5_dollars(home, run_inproc):
    """``per = "session"``: each session has its own $5; a session at $5 halts, others go on."""
    with_budgets(home)
    book = Book(run_inproc, home)
    first = book.verdict("2026-11-26T10:00:00Z", "4", "--cycle-id", "s1")
    assert first["verdict"] == "allow"
    book("2026-11-26T10:00:01Z", "record", "4", "--provider", "anthropic",
         "--verdict-ref", first["verdict_ref"])  # fmt: skip
    halted = book.verdict("2026-11-26T10:00:02Z", "1", "--cycle-id", "s1")
    assert halted["verdict"] == "halt-100"
    assert halted["deciding_cap"] == "budget:claude-session[s1]"
    assert halted["budgets"][0] == {
        "name": "claude-session", "period": "day",
        "period_start": "2026-11-26T00:00:00.000000Z", "period_end": "2026-11-27T00:00:00.000000Z",
        "used": 4.0, "reserved": 0.0, "cap": 5.0, "usage_pct": 100.0, "per_value": "s1",
    }  # fmt: skip
    other = book.verdict("2026-11-26T10:00:03Z", "4.99", "--cycle-id", "s2")
    assert other["verdict"] == "warn-90"
    assert book.verdict("2026-11-27T00:00:00Z", "4", "--cycle-id", "s1")["verdict"] == "allow"


def test_the_research_agents_200_a_month(home, run_inproc):
    """``match.agent = "research-*"``: every research agent's spend in one monthly cap."""
    with_budgets(home)
    book = Book(run_inproc, home)
    book("2026-11-02T09:00:00Z", "record", "150", "--provider", "openai", "--agent", "research-a")
    book("2026-11-20T09:00:00Z", "record", "40", "--provider", "openai", "--agent", "research-c")
    book("2026-11-21T09:00:00Z", "record", "30", "--provider", "openai", "--agent", "coder")
    late = book.verdict("2026-11-30T22:00:00Z", "15", "--agent", "research-b")
    assert late["verdict"] == "halt-100"
    assert late["deciding_cap"] == "budget:research-monthly"
    assert shown(late)["research-monthly"] == (190.0, 0.0)
    assert book.verdict("2026-11-30T22:00:00Z", "15", "--agent", "coder")["verdict"] == "allow"
    assert book.verdict("2026-12-01T00:00:00Z", "15", "--agent", "research-b")["verdict"] == "allow"


def test_opus_at_most_50_a_week(home, run_inproc):
    """``match.model``: priced from tokens or named with --model; the week starts Monday."""
    with_budgets(home)
    book = Book(run_inproc, home)
    book("2026-11-23T00:00:00Z", "record", "45", "--provider", "anthropic",
         "--model-id", "claude-opus-4-1")  # fmt: skip
    sunday = book.verdict("2026-11-29T23:59:00Z", "6", "--model", "claude-opus-4-1")
    assert sunday["verdict"] == "halt-100"
    assert sunday["deciding_cap"] == "budget:opus-weekly"
    assert book.verdict("2026-11-29T23:59:00Z", "6", "--model", "claude-sonnet-4-5")["budgets"]
    monday = book.verdict("2026-11-30T00:00:00Z", "6", "--model", "claude-opus-4-1")
    assert monday["verdict"] == "allow"


def test_no_more_than_20_in_any_5_hours(home, run_inproc):
    """``rolling:5h``: spend leaves the window exactly 5 hours after it was sealed."""
    with_budgets(home)
    book = Book(run_inproc, home)
    book("2026-11-26T10:00:00Z", "record", "15", "--provider", "openai")
    before = book.verdict("2026-11-26T14:59:00Z", "5")
    assert (before["verdict"], before["deciding_cap"]) == ("halt-100", "budget:burst")
    assert shown(before)["burst"] == (15.0, 0.0)
    edge = book.verdict("2026-11-26T15:00:00Z", "5")
    assert (edge["verdict"], shown(edge)["burst"]) == ("allow", (0.0, 0.0))
    after = book.verdict("2026-11-26T15:01:00Z", "5")
    assert shown(after)["burst"] == (0.0, 5.0)
    assert after["budgets"][-1]["period_start"] == "2026-11-26T10:01:00.000000Z"


def test_this_key_10_a_day(home, run_inproc):
    """``match.key``: calls made under the gateway key ``ci`` share $10 a day."""
    with_budgets(home)
    book = Book(run_inproc, home)
    book("2026-11-26T08:00:00Z", "record", "9", "--provider", "openai", "--key", "ci")
    halted = book.verdict("2026-11-26T09:00:00Z", "1", "--key", "ci")
    assert (halted["verdict"], halted["deciding_cap"]) == ("halt-100", "budget:ci-key")
    assert book.verdict("2026-11-26T09:00:00Z", "1", "--key", "other")["verdict"] == "allow"


def test_tags_match_budgets_on_verdict_and_record(home, run_inproc):
    """``--tag`` is repeatable; a budget matching a tag counts records carrying it."""
    with_budgets(home, '[[budgets]]\nname = "nightly"\nusd = 3\nperiod = "day"\n'
                       'match = { tag = "job:nightly" }\n')  # fmt: skip
    book = Book(run_inproc, home)
    book("2026-11-26T01:00:00Z", "record", "2", "--provider", "openai",
         "--tag", "team-a", "--tag", "job:nightly")  # fmt: skip
    tagged = book.verdict("2026-11-26T02:00:00Z", "1", "--tag", "job:nightly")
    assert (tagged["verdict"], shown(tagged)) == ("halt-100", {"nightly": (2.0, 0.0)})
    assert book.verdict("2026-11-26T02:00:00Z", "1", "--tag", "team-a")["budgets"] == []
    bad = book("2026-11-26T02:00:00Z", "verdict", "1", "--tag", "a b", code=2)
    assert "--tag" in bad.stderr


def test_a_home_without_budgets_prints_no_budgets_field(home, run_inproc):
    """Today's verdict output is unchanged where no budget is defined."""
    document = Book(run_inproc, home).verdict("2026-11-26T10:00:00Z", "1")
    assert "budgets" not in document


def test_a_malformed_budget_exits_78_naming_it(home):
    """A bad budget in ledger.toml halts every command with one line naming budget and key."""
    with_budgets(home, '[[budgets]]\nname = "team"\nusd = 5\nperiod = "fortnight"\n')
    result = run_process(["--home", str(home), "verdict", "1"], clean_env())
    assert result.code == 78
    assert result.stdout == ""
    assert result.stderr.startswith("ledger: ")
    assert 'budgets "team".period' in result.stderr
    assert "Traceback" not in result.stderr


def test_a_changed_budget_is_counted_afresh_from_the_chain(home, run_inproc):
    """Counters kept for old definitions are never trusted: a new budget sees today's spend."""
    book = Book(run_inproc, home)
    book("2026-11-26T08:00:00Z", "record", "7", "--provider", "openai", "--agent", "research-a")
    with_budgets(home)
    found = book.verdict("2026-11-26T09:00:00Z", "1", "--agent", "research-b")
    assert shown(found)["research-monthly"] == (7.0, 0.0)
    config = home / "ledger.toml"
    config.write_text(config.read_text().replace('"research-*"', '"nobody"'))
    assert "research-monthly" not in shown(
        book.verdict("2026-11-26T09:00:01Z", "1", "--agent", "research-b")
    )
    config.write_text(config.read_text().replace('"nobody"', '"research-*"'))
    again = book.verdict("2026-11-26T09:00:02Z", "1", "--agent", "research-b")
    assert shown(again)["research-monthly"] == (7.0, 2.0)


def test_rebuild_state_gives_the_same_figures(home, run_inproc):
    """The counters are a fold of the chain: rebuilding them changes no figure."""
    with_budgets(home)
    book = Book(run_inproc, home)
    ref = book.verdict("2026-11-26T10:00:00Z", "2", "--cycle-id", "s", "--agent", "research-a")
    book("2026-11-26T10:01:00Z", "record", "1.5", "--provider", "anthropic",
         "--verdict-ref", ref["verdict_ref"])  # fmt: skip
    book.verdict("2026-11-26T10:02:00Z", "1", "--cycle-id", "s", "--agent", "research-a")
    before = json.loads(state_path(home).read_text().splitlines()[0])["data"]["budgets"]
    book("2026-11-26T10:03:00Z", "rebuild-state")
    after = json.loads(state_path(home).read_text().splitlines()[0])["data"]["budgets"]
    assert after == before
    check = book.verdict("2026-11-26T10:04:00Z", "0.5", "--cycle-id", "s", "--agent", "research-a")
    assert shown(check) == {"claude-session[s]": (1.5, 1.0), "research-monthly": (1.5, 1.0),
                            "burst": (1.5, 1.0)}  # fmt: skip


def test_the_verdict_seals_the_scope_its_record_inherits(home, run_inproc):
    """A record with verdict_ref counts where its verdict matched, whatever it carries itself."""
    with_budgets(home)
    book = Book(run_inproc, home)
    ref = book.verdict("2026-11-26T10:00:00Z", "2", "--agent", "research-a", "--tag", "t",
                       "--key", "ci")["verdict_ref"]  # fmt: skip
    sealed = [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()]
    payload = sealed[-1]["payload"]
    assert (payload["agent"], payload["tags"], payload["key"]) == ("research-a", ["t"], "ci")
    assert [b["name"] for b in payload["budgets"]] == ["research-monthly", "burst", "ci-key"]
    book("2026-11-26T10:01:00Z", "record", "2", "--provider", "anthropic", "--verdict-ref", ref)
    after = book.verdict("2026-11-26T10:02:00Z", "0.01", "--agent", "research-a", "--key", "ci")
    assert shown(after)["research-monthly"] == (2.0, 0.0)
    assert shown(after)["ci-key"] == (2.0, 0.0)


def test_the_python_api_takes_tags_and_keys(home, monkeypatch):
    """``book.verdict(..., tags=[...])`` and ``book.record`` hold budgets as the CLI does."""
    import ledger

    with_budgets(home, '[[budgets]]\nname = "nightly"\nusd = 3\nperiod = "day"\n'
                       'match = { tag = "nightly" }\n')  # fmt: skip
    for name, value in {"LEDGER_NOW": "2026-11-26T10:00:00Z", **CAP_ENV}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LEDGER_NO_SERVER", "1")
    book = ledger.open(home)
    first = book.verdict(2.5, provider="openai", tags=["nightly"])
    assert first.allowed
    book.record(2.5, provider="openai", verdict_ref=first.verdict_ref)
    second = book.verdict(1, provider="openai", tags=["nightly"])
    assert (second.verdict, second.deciding_cap) == ("halt-100", "budget:nightly")
    assert book.verdict(1, provider="openai").allowed


@pytest.mark.parametrize("home", ["file", "postgres"], indirect=True)
def test_budgets_hold_on_both_stores(home, run_inproc):
    """The same figures on the file store and the PostgreSQL store."""
    with_budgets(home)
    book = Book(run_inproc, home)
    ref = book.verdict("2026-11-26T10:00:00Z", "3", "--cycle-id", "s")["verdict_ref"]
    book("2026-11-26T10:01:00Z", "record", "4", "--provider", "anthropic", "--verdict-ref", ref)
    halted = book.verdict("2026-11-26T10:02:00Z", "1", "--cycle-id", "s")
    assert (halted["verdict"], shown(halted)["claude-session[s]"]) == ("halt-100", (4.0, 0.0))


def test_spend_priced_by_rebuild_state_counts_on_the_budgets(home, run_inproc):
    """A record of an unpriced model counts on its budgets once rebuild-state prices it."""
    with_budgets(home, '[[budgets]]\nname = "team"\nusd = 1\nperiod = "day"\n'
                       'match = { agent = "team-*" }\n')  # fmt: skip
    book = Book(run_inproc, home)
    usage = '{"input_tokens": 100000, "output_tokens": 0}'
    book("2026-11-26T10:00:00Z", "record", "--provider", "anthropic", "--model",
         "claude-unpriced-x", "--usage-json", usage, "--agent", "team-a")  # fmt: skip
    halted = book.verdict("2026-11-26T10:01:00Z", "0.01", "--agent", "team-a")
    assert halted["uncertainty_reason"] == "counter_inconsistent"
    config = home / "ledger.toml"
    config.write_text(config.read_text() + '\n[prices."anthropic/claude-unpriced-x"]\n'
                      "input_per_mtok = 9\noutput_per_mtok = 9\n")  # fmt: skip
    book("2026-11-26T10:02:00Z", "rebuild-state")
    priced = book.verdict("2026-11-26T10:03:00Z", "0.2", "--agent", "team-a")
    assert (priced["verdict"], shown(priced)["team"]) == ("halt-100", (0.9, 0.0))


def _state_kept_before_budgets(home):
    from ledger.runtime import Runtime

    runtime = Runtime(home, {})
    stored = runtime.states.load()
    assert stored is not None
    del stored.data["budgets"]
    runtime.states.save_state(stored.head_hash, stored.size, stored.data)


@pytest.mark.parametrize(("defined", "counted"), [("", False), (FIVE_TOML, True)])
def test_a_state_kept_before_budgets_is_counted_afresh_only_when_budgets_are_defined(
    home, run_inproc, defined, counted
):
    """Upgrading a home without budgets costs nothing; one that defines them counts them afresh.

    Only the budgets are counted (over their current periods): the rest of the
    state is kept, so nothing is rebuilt from line 1.
    """
    from ledger.runtime import Runtime
    from ledger.services.chain.state import load_counter

    Book(run_inproc, home)("2026-11-26T10:00:00Z", "record", "1", "--provider", "openai")
    _state_kept_before_budgets(home)
    with_budgets(home, defined)
    runtime = Runtime(home, {})
    with runtime.chain.read_transaction() as tx:
        counter = load_counter(tx, runtime)
    assert counter.problem is None
    assert counter.rebuilt is False
    assert (counter.refolded is not None) is counted
    assert "budgets" in counter.data
