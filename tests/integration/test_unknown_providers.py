"""A provider the home does not know: a verdict is refused (exit 2), a record sealed with a warning."""

from pathlib import Path

import pytest

import ledger as ledger_api
from tests.gate_helpers import env_at
from tests.integration.server_helpers import (
    entries,
    init_home,
    ledger,
    served_env,
    start_server,
)
from tests.integration.test_agent_helpers import cli, event_types

CAPS = "\n[usd.provider_caps]\nopenai = 3\n"


@pytest.fixture
def capped(home: Path) -> Path:
    config = home / "ledger.toml"
    config.write_text(config.read_text() + CAPS)
    return home


def test_a_mistyped_provider_is_a_bad_command_line_naming_the_nearest(capped, run_inproc):
    before = event_types(capped)
    result = cli(run_inproc, capped, "verdict", "2.5", "--provider", "opneai", env=env_at())
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("ledger: --provider: opneai is not a provider")
    assert "did you mean openai?" in result.stderr
    assert event_types(capped) == before  # nothing reserved, nothing written


def test_known_providers_are_admitted(capped, run_inproc):
    """A cap, usd.providers, a price override or the genai-prices snapshot names it."""
    config = capped / "ledger.toml"
    prices = '\n[prices."acme/m1"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
    config.write_text(config.read_text() + prices)
    env = env_at(LEDGER_USD_PROVIDERS='["inhouse"]')
    for provider in ("openai", "inhouse", "acme", "mistral", "aggregate"):
        result = cli(run_inproc, capped, "verdict", "0.01", "--provider", provider, env=env)
        assert result.code == 0, (provider, result.stderr)
    assert cli(run_inproc, capped, "verdict", "0.01", env=env).code == 0
    refused = cli(run_inproc, capped, "verdict", "0.01", "--provider", "inhose", env=env)
    assert (refused.code, "did you mean inhouse?" in refused.stderr) == (2, True)


def test_the_cap_of_the_intended_provider_still_holds(capped, run_inproc):
    admitted = cli(run_inproc, capped, "verdict", "2.5", "--provider", "openai", env=env_at())
    assert admitted.json()["verdict"] in {"allow", "warn-90"}
    again = cli(run_inproc, capped, "verdict", "2.5", "--provider", "openai", env=env_at())
    assert (again.code, again.json()["deciding_cap"]) == (1, "provider:openai")
    assert cli(run_inproc, capped, "verdict", "2.5", "--provider", "opneai", env=env_at()).code == 2


def test_a_record_naming_an_unknown_provider_is_sealed_with_a_warning(capped, run_inproc):
    result = cli(run_inproc, capped, "record", "1", "--provider", "opneai", env=env_at())
    assert result.code == 0, result.stderr
    assert result.json()["provider"] == "opneai"
    assert result.stderr.startswith("ledger: warning: --provider: opneai is not a provider")
    assert "recorded anyway" in result.stderr
    assert event_types(capped)[-1] == "budget.record_call"
    usage = cli(run_inproc, capped, "usage", env=env_at()).json()
    assert usage["usd_used_micros"] == 1_000_000  # counted in the aggregate


def test_usd_providers_must_be_provider_ids(capped, run_inproc):
    bad = cli(
        run_inproc, capped, "verdict", "1", env={**env_at(), "LEDGER_USD_PROVIDERS": '["Open AI"]'}
    )
    assert bad.code == 78
    assert "LEDGER_USD_PROVIDERS" in bad.stderr


def test_the_python_api_raises_a_ledger_error_with_exit_code_2(capped, monkeypatch):
    for key, value in env_at().items():
        monkeypatch.setenv(key, value)
    book = ledger_api.open(home=capped)
    with pytest.raises(ledger_api.UnknownProviderError) as caught:
        book.verdict(2.5, provider="opneai")
    assert caught.value.exit_code == 2
    assert isinstance(caught.value, ledger_api.LedgerError)
    assert "did you mean openai?" in str(caught.value)


def test_the_served_path_answers_as_in_process(tmp_path):
    home = init_home(tmp_path / "home")
    config = home / "ledger.toml"
    config.write_text(config.read_text() + CAPS)
    server = start_server(home)
    try:
        refused = ledger(home, "verdict", "2.5", "--provider", "opneai", env=served_env())
        recorded = ledger(home, "record", "1", "--provider", "opneai", env=served_env())
    finally:
        assert server.stop() == 0
    assert server.served_count() >= 1
    assert (refused.code, refused.stdout) == (2, "")
    assert "did you mean openai?" in refused.stderr
    assert recorded.code == 0, recorded.stderr
    assert "recorded anyway" in recorded.stderr
    assert [e["event_type"] for e in entries(home)] == ["budget.record_call"]
