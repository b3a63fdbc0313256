"""A usage count or tier with no price here is never free: the record is at least its estimate.

``ledger record --usage-json`` with a count the product does not know (a new
``*_tokens`` kind), or a service tier the model has no price for, records the
call at the larger of its verdict's estimate and what was priced, keeps the
priced figure beside it, names the unknown part, warns on stderr, and
``ledger metrics`` counts it.
"""

import json
from typing import Any

import pytest

from tests.integration.test_metrics import samples

NOW = {"LEDGER_NOW": "2026-03-02T10:00:00Z"}
PRICES = '\n[prices."openai/gpt-test"]\ninput_per_mtok = 2\noutput_per_mtok = 8\n'


@pytest.fixture
def priced_home(home):
    with (home / "ledger.toml").open("a") as config:
        config.write(PRICES)
    return home


def _verdict(run_inproc, home) -> dict[str, Any]:
    result = run_inproc(
        ["--home", str(home), "verdict", "--provider", "openai", "--model", "gpt-test",
         "--input-tokens", "1000", "--max-output-tokens", "4000"], env=NOW,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    found: dict[str, Any] = result.json()
    return found


def _record(run_inproc, home, ref: str, usage: dict[str, Any]):
    return run_inproc(
        ["--home", str(home), "record", "--provider", "openai", "--model", "gpt-test",
         "--verdict-ref", ref, "--usage-json", json.dumps(usage)], env=NOW,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("usage", "named"),
    [
        ({"prompt_tokens": 100, "completion_tokens": 50,
          "completion_tokens_details": {"hologram_tokens": 40}},
         "completion_tokens_details.hologram_tokens"),
        ({"prompt_tokens": 100, "completion_tokens": 50, "smell_tokens": 7},
         "smell_tokens"),
        ({"prompt_tokens": 100, "completion_tokens": 50, "service_tier": "scale"},
         "service_tier:scale"),
    ],
)  # fmt: skip
def test_the_record_is_at_least_the_estimate_with_a_warning_and_a_metric(
    priced_home, run_inproc, usage, named
):
    verdict = _verdict(run_inproc, priced_home)
    estimate = verdict["estimated_micros"]
    assert estimate == 1000 * 2 + 4000 * 8
    result = _record(run_inproc, priced_home, verdict["verdict_ref"], usage)
    assert result.code == 0, result.stderr
    assert named in result.stderr
    assert "estimate" in result.stderr
    document = result.json()
    assert document["actual_micros"] == estimate  # never the $0 of what is not known
    assert document["settled"] is True
    (record,) = [
        json.loads(line)["payload"]
        for line in (priced_home / "events.jsonl").read_text().splitlines()
        if json.loads(line)["event_type"] == "budget.record_call"
    ]
    assert record["usage_micros"] == 100 * 2 + 50 * 8
    assert record["unknown_usage"] == [named]
    metrics = run_inproc(["--home", str(priced_home), "metrics"], env=NOW)
    assert metrics.code == 0, metrics.stderr
    got = samples(metrics.stdout)
    assert got["ledger_unknown_usage_records_today", (("kind", named),)] == 1.0


def test_known_counts_are_priced_as_they_are(priced_home, run_inproc):
    verdict = _verdict(run_inproc, priced_home)
    usage = {"prompt_tokens": 100, "completion_tokens": 50,
             "completion_tokens_details": {"reasoning_tokens": 20, "audio_tokens": 0}}  # fmt: skip
    result = _record(run_inproc, priced_home, verdict["verdict_ref"], usage)
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    assert result.json()["actual_micros"] == 100 * 2 + 50 * 8
