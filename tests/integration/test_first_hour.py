"""The first hour of a new home: the billing choice at init, and init on an existing home.

Run as a user runs them: real ``python -m ledger`` processes on a fresh home.
"""

import json
import tomllib
from pathlib import Path

from tests.conftest import clean_env, run_process

NOW = "2026-03-02T12:00:00Z"


def _env() -> dict[str, str]:
    return clean_env(LEDGER_NOW=NOW)


def _ledger(home: Path, *args: str) -> "tuple[int, str, str]":
    result = run_process(["--home", str(home), *args], env=_env())
    return result.code, result.stdout, result.stderr


def test_init_without_an_observer_says_verdicts_halt_near_the_cap(tmp_path: Path):
    """The default home prints, once, why it will halt above 75 % and both ways out."""
    code, out, err = _ledger(tmp_path / "h", "init", "--daily-cap-usd", "10")
    assert code == 0, err
    assert json.loads(out)["created_config"] is True  # stdout stays one JSON object
    assert err.count("\n") == 1
    assert err.startswith("ledger: no billing observer: verdicts halt")
    for words in ("75% of a cap", "--billing none", "[observer]"):
        assert words in err


def test_a_default_home_halts_billing_stale_naming_both_ways_out(tmp_path: Path):
    """Past 75 % without an observer: the halt names the observer and --billing none."""
    home = tmp_path / "h"
    _ledger(home, "init", "--daily-cap-usd", "10")
    assert _ledger(home, "verdict", "8")[0] == 0  # reserves 80 % of the cap
    code, out, _ = _ledger(home, "verdict", "0.5")
    decision = json.loads(out)
    assert (code, decision["uncertainty_reason"]) == (1, "billing_stale")
    assert "[observer] command" in decision["diagnostic"]
    assert "--billing none" in decision["diagnostic"]


def test_billing_none_reaches_warn_90_and_halt_100(tmp_path: Path):
    """--billing none writes stale_halt_pct = 100 with its caveat; caps then decide."""
    home = tmp_path / "h"
    code, _out, err = _ledger(home, "init", "--daily-cap-usd", "10", "--billing", "none")
    assert (code, err) == (0, "")
    text = (home / "ledger.toml").read_text()
    assert tomllib.loads(text)["billing"]["stale_halt_pct"] == 100
    assert "out of band" in text
    assert "gateway keys" in text
    first = _ledger(home, "verdict", "9.5")
    assert (first[0], json.loads(first[1])["verdict"]) == (0, "warn-90")
    second = _ledger(home, "verdict", "1")
    assert (second[0], json.loads(second[1])["verdict"]) == (1, "halt-100")


def test_billing_takes_only_none(tmp_path: Path):
    """Any other --billing value is a bad command line, and nothing is created."""
    code, _out, err = _ledger(tmp_path / "h", "init", "--billing", "stripe")
    assert code == 2, err
    assert err.startswith("ledger: --billing:")
    assert not (tmp_path / "h").exists()


def test_status_shows_the_billing_source(tmp_path: Path):
    """none, then observer when one is configured, then polling with the daemon's poll."""
    home = tmp_path / "h"
    _ledger(home, "init", "--daily-cap-usd", "10")
    code, out, _ = _ledger(home, "status", "--json")
    assert (code, json.loads(out)["billing"]["source"]) == (0, "none")
    assert "Billing: none (verdicts halt above 75% of a cap" in _ledger(home, "status")[1]
    config = home / "ledger.toml"
    text = config.read_text().replace("# command = [", 'command = ["/bin/true"]\n# command = [')
    config.write_text(text.replace("poll_seconds = 240", "poll_seconds = 0"))
    assert json.loads(_ledger(home, "status", "--json")[1])["billing"]["source"] == "observer"
    config.write_text(text)
    assert json.loads(_ledger(home, "status", "--json")[1])["billing"]["source"] == "polling"
    none_home = tmp_path / "own"
    _ledger(none_home, "init", "--daily-cap-usd", "10", "--billing", "none")
    assert "Billing: none (ledger's own records only)" in _ledger(none_home, "status")[1]


def test_init_with_another_cap_on_an_existing_home_refuses(tmp_path: Path):
    """A different --daily-cap-usd names the current cap and the key to change; 78."""
    home = tmp_path / "h"
    _ledger(home, "init", "--daily-cap-usd", "50")
    before = (home / "ledger.toml").read_bytes()
    code, out, err = _ledger(home, "init", "--daily-cap-usd", "20")
    assert (code, out) == (78, "")
    assert err == (
        "ledger: this home already has a daily cap of $50.00: change usd.daily_cap in "
        f"{home / 'ledger.toml'} (--daily-cap-usd 20 was not applied)\n"
    )
    assert (home / "ledger.toml").read_bytes() == before


def test_init_with_the_same_cap_on_an_existing_home_is_a_no_op(tmp_path: Path):
    """The same cap again: exit 0, nothing created or changed."""
    home = tmp_path / "h"
    _ledger(home, "init", "--daily-cap-usd", "50")
    before = (home / "ledger.toml").read_bytes()
    code, out, err = _ledger(home, "init", "--daily-cap-usd", "50.00")
    assert code == 0, err
    document = json.loads(out)
    assert (document["created_config"], document["created_key"]) == (False, False)
    assert (home / "ledger.toml").read_bytes() == before


def test_billing_none_on_an_existing_default_home_refuses(tmp_path: Path):
    """--billing none cannot be applied silently to a home that halts at 75 %."""
    home = tmp_path / "h"
    _ledger(home, "init", "--daily-cap-usd", "50")
    code, _out, err = _ledger(home, "init", "--billing", "none")
    assert code == 78
    assert "billing.stale_halt_pct = 75: set it to 100 in" in err
