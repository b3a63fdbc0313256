"""Token flags, prices and unknown prices through the command line (SPEC §7)."""

import json

import pytest

from tests.gate_helpers import Observer, at, chain_lines, env_at, events_of

PRICES = """
[prices."anthropic/test-model"]
input_per_mtok = 3
output_per_mtok = 15
cache_read_per_mtok = 0.3
cache_write_per_mtok = 3.75
cache_write_1h_per_mtok = 6
"""


@pytest.fixture
def ledger(run_inproc, home):
    def run(*args, env=None, stdin=""):
        return run_inproc(["--home", str(home), *args], env if env is not None else env_at(), stdin)

    return run


def add_config(home, text):
    path = home / "ledger.toml"
    path.write_text(path.read_text() + text)


def one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert lines
    assert lines[-1].startswith("ledger: ")
    return lines[-1]


class TestVerdictFromTokens:
    def test_estimate_is_the_price_of_input_and_max_output(self, ledger, home):
        add_config(home, PRICES)
        result = ledger(
            "verdict", "--provider", "anthropic", "--model", "test-model",
            "--input-tokens", "1200", "--max-output-tokens", "800",
        )  # fmt: skip
        assert result.code == 0, result.stderr
        document = result.json()
        # 1200 × $3 + 800 × $15 per million = 3,600 + 12,000 µ$
        assert document["estimated_micros"] == 15_600
        assert (document["model"], document["price_source"]) == ("test-model", "config")
        payload = events_of(home, "budget.allow")[0]["payload"]
        assert payload["model"] == "test-model"
        assert payload["price_source"] == "config"
        assert (payload["input_tokens"], payload["max_output_tokens"]) == (1200, 800)
        assert payload["reservation"]["micros"] == 15_600

    def test_library_price_names_its_version(self, ledger):
        result = ledger(
            "verdict", "--provider", "anthropic", "--model", "claude-opus-4-1-20250805",
            "--input-tokens", "1000", "--max-output-tokens", "100",
        )  # fmt: skip
        assert result.code == 0, result.stderr
        document = result.json()
        assert document["price_source"].startswith("genai-prices ")
        assert document["estimated_micros"] == 1000 * 15 + 100 * 75

    def test_provider_is_inferred_when_left_out(self, ledger):
        result = ledger("verdict", "--model", "gpt-4o", "--input-tokens", "1000",
                        "--max-output-tokens", "100")  # fmt: skip
        assert result.code == 0, result.stderr
        assert result.json()["provider"] == "openai"

    def test_unpriced_model_exits_2_and_reserves_nothing(self, ledger, home):
        result = ledger(
            "verdict", "--provider", "anthropic", "--model", "no-such-model",
            "--input-tokens", "10", "--max-output-tokens", "10",
        )  # fmt: skip
        assert result.code == 2
        assert result.stdout == ""
        assert one_error_line(result).startswith("ledger: no price for anthropic/no-such-model: ")
        assert chain_lines(home) == []

    def test_without_estimate_or_tokens_is_a_usage_error(self, ledger):
        result = ledger("verdict", "--model", "test-model", "--input-tokens", "10")
        assert result.code == 2
        assert "--max-output-tokens" in one_error_line(result)


USAGE = {
    "input_tokens": 1000,
    "cache_creation_input_tokens": 3000,
    "cache_creation": {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 1000},
    "cache_read_input_tokens": 5000,
    "output_tokens": 700,
}
# 1000×3 + 2000×3.75 + 1000×6 + 5000×0.3 + 700×15 = 3,000 + 7,500 + 6,000 + 1,500 + 10,500
USAGE_MICROS = 28_500


class TestRecordFromUsage:
    def test_cost_from_the_usage_object_settles_the_verdict(self, ledger, home):
        add_config(home, PRICES)
        ref = ledger("verdict", "0.05", "--provider", "anthropic").json()["verdict_ref"]
        result = ledger(
            "record", "--provider", "anthropic", "--model", "test-model",
            "--usage-json", json.dumps(USAGE), "--verdict-ref", ref, "--idempotency-key", "k-1",
        )  # fmt: skip
        assert result.code == 0, result.stderr
        document = result.json()
        assert document["actual_micros"] == USAGE_MICROS
        assert document["settled"] is True
        assert document["price_source"] == "config"
        payload = events_of(home, "budget.record_call")[0]["payload"]
        assert payload["actual_micros"] == USAGE_MICROS
        assert payload["model_id"] == "test-model"
        assert payload["tokens"] == {
            "input": 1000, "cache_write_5m": 2000, "cache_write_1h": 1000,
            "cache_read": 5000, "output": 700, "reasoning": 0,
        }  # fmt: skip
        assert payload["rates"]["cache_write_1h"] == "6"
        assert (payload["input_tokens"], payload["output_tokens"]) == (9000, 700)
        assert ledger("usage").json()["usd_used_micros"] == USAGE_MICROS

    def test_usage_json_from_stdin(self, ledger, home):
        add_config(home, PRICES)
        result = ledger("record", "--provider", "anthropic", "--model", "test-model",
                        "--usage-json", "-", stdin=json.dumps(USAGE))  # fmt: skip
        assert result.code == 0, result.stderr
        assert result.json()["actual_micros"] == USAGE_MICROS

    def test_openai_chat_usage_priced_from_the_library(self, ledger):
        usage = {
            "prompt_tokens": 2000, "completion_tokens": 500, "total_tokens": 2500,
            "prompt_tokens_details": {"cached_tokens": 1200},
            "completion_tokens_details": {"reasoning_tokens": 200},
        }  # fmt: skip
        result = ledger("record", "--provider", "openai", "--model", "gpt-4o",
                        "--usage-json", json.dumps(usage))  # fmt: skip
        assert result.code == 0, result.stderr
        # 800 × 2.5 + 1200 × 1.25 + 500 × 10
        assert result.json()["actual_micros"] == 8_500

    @pytest.mark.parametrize(
        ("usage", "message"),
        [
            ("{not json", "--usage-json: not JSON"),
            ('{"input_tokens": -5, "output_tokens": 1}', "negative"),
            (
                json.dumps(
                    {
                        "input_tokens": 1,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 1,
                        "cache_creation": {"ephemeral_1h_input_tokens": 4},
                    }
                ),
                "larger than cache_creation_input_tokens",
            ),
            ('{"prompt_tokens": 5, "completion_tokens": 1}', "lacks input_tokens"),
        ],
    )
    def test_bad_usage_objects_exit_2_and_write_nothing(self, ledger, home, usage, message):
        add_config(home, PRICES)
        result = ledger("record", "--provider", "anthropic", "--model", "test-model",
                        "--usage-json", usage)  # fmt: skip
        assert result.code == 2
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1
        assert message in one_error_line(result)
        assert chain_lines(home) == []

    def test_unknown_fields_are_fine(self, ledger, home):
        add_config(home, PRICES)
        usage = {**USAGE, "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"}
        result = ledger("record", "--provider", "anthropic", "--model", "test-model",
                        "--usage-json", json.dumps(usage))  # fmt: skip
        assert result.json()["actual_micros"] == USAGE_MICROS


class TestUnknownPrice:
    def record_unpriced(self, ledger):
        usage = {"input_tokens": 1000, "output_tokens": 100}
        result = ledger("record", "--provider", "anthropic", "--model", "mystery-1",
                        "--usage-json", json.dumps(usage), "--idempotency-key", "m-1")  # fmt: skip
        assert result.code == 0, result.stderr
        return result

    def test_record_is_sealed_with_null_and_verdicts_halt(self, ledger, home):
        result = self.record_unpriced(ledger)
        assert result.json()["actual_micros"] is None
        assert "no price for anthropic/mystery-1" in result.stderr
        payload = events_of(home, "budget.record_call")[0]["payload"]
        assert payload["actual_micros"] is None
        assert payload["tokens"]["input"] == 1000
        halted = ledger("verdict", "0.01", "--provider", "openai")
        assert halted.code == 1
        document = halted.json()
        assert document["verdict"] == "halt-uncertainty"
        assert document["uncertainty_reason"] == "counter_inconsistent"
        assert "anthropic/mystery-1" in document["diagnostic"]
        assert ledger("verify-chain").code == 0

    def test_pricing_the_model_and_rebuilding_state_clears_it(self, ledger, home):
        self.record_unpriced(ledger)
        assert ledger("verdict", "0.01").code == 1
        # rebuild-state alone does not clear it: the model still has no price
        assert ledger("rebuild-state").code == 0
        assert ledger("verdict", "0.01").code == 1
        add_config(
            home, '\n[prices."anthropic/mystery-1"]\ninput_per_mtok = 2\noutput_per_mtok = 10\n'
        )
        assert ledger("rebuild-state").code == 0
        rebuilt = events_of(home, "ledger.state_rebuilt")[-1]["payload"]
        # 1000 × 2 + 100 × 10 = 3,000 µ$, sealed in the chain, so a rebuild from the
        # chain alone (whatever the prices are then) finds the same spend.
        assert rebuilt["priced"][0]["actual_micros"] == 3_000
        allowed = ledger("verdict", "0.01")
        assert allowed.code == 0, allowed.stdout
        assert allowed.json()["usd_used_micros"] == 3_000
        (home / "state" / "derived.json").unlink()
        assert ledger("usage").json()["usd_used_micros"] == 3_000

    @pytest.mark.parametrize("scope", ["anthropic", "aggregate"])
    def test_forcing_a_reconcile_of_its_scope_clears_it(self, ledger, home, tmp_path, scope):
        self.record_unpriced(ledger)
        observer = Observer(tmp_path / "obs", home)
        observer.answer(0.25, at(-30))
        env = env_at(10, **observer.env)
        assert ledger("verdict", "0.01", "--provider", "anthropic", env=env).code == 1
        # Another provider's forced reconcile leaves the unpriced spend where it was.
        other = ledger("reconcile", "--provider", "openai", "--force-reason", "other", env=env)
        assert other.code == 0, other.stderr
        assert ledger("verdict", "0.01", "--provider", "anthropic", env=env).code == 1
        forced = ledger("reconcile", "--provider", scope, "--force-reason",
                        "invoice checked: mystery-1 billed", env=env)  # fmt: skip
        assert forced.code == 0, forced.stderr
        assert forced.json()["status"] == "forced"
        allowed = ledger("verdict", "0.01", "--provider", "anthropic", env=env)
        assert allowed.code == 0, allowed.stdout
        # Re-based to the bill: the scope counts what the provider billed.
        usage = ledger("usage", "--provider", scope, env=env).json()
        assert usage["usd_used_micros"] == 250_000
        assert ledger("verify-chain").code == 0

    def test_yesterdays_unpriced_spend_no_longer_halts(self, ledger):
        self.record_unpriced(ledger)
        assert ledger("verdict", "0.01", env=env_at(86_400)).code == 0


class TestPricesCommands:
    def test_show_override_and_library(self, ledger, home):
        add_config(home, PRICES)
        result = ledger("prices", "show", "test-model", "--provider", "anthropic")
        assert result.code == 0, result.stderr
        assert result.json() == {
            "provider": "anthropic", "model": "test-model", "input_per_mtok": "3",
            "output_per_mtok": "15", "cache_read_per_mtok": "0.3", "cache_write_per_mtok": "3.75",
            "cache_write_1h_per_mtok": "6", "price_source": "config", "tiers": [],
            "service_tiers": {},
        }  # fmt: skip
        library = ledger("prices", "show", "claude-opus-4-1").json()
        assert library["provider"] == "anthropic"
        assert library["input_per_mtok"] == "15"
        assert library["price_source"].startswith("genai-prices ")

    def test_show_unknown_model_exits_1(self, ledger):
        result = ledger("prices", "show", "no-such-model", "--provider", "anthropic")
        assert result.code == 1
        assert one_error_line(result).startswith("ledger: no price for anthropic/no-such-model")

    def test_sync_writes_the_snapshot_and_seals_its_digest(self, ledger, home):
        (home / "prices" / "anthropic.json").unlink()
        result = ledger("prices", "sync")
        assert result.code == 0, result.stderr
        document = result.json()
        assert (home / "prices" / "anthropic.json").is_file()
        sealed = events_of(home, "ledger.prices_synced")[0]["payload"]
        assert sealed["sha256"] == document["sha256"]
        assert sealed["source"].startswith("genai-prices ")
        assert ledger("verify-chain").code == 0
        assert ledger("verdict", "--model", "claude-opus-4-1", "--input-tokens", "1",
                      "--max-output-tokens", "1").code == 0  # fmt: skip

    def test_no_snapshot_means_no_price(self, ledger, home):
        for path in (home / "prices").iterdir():
            path.unlink()
        result = ledger("verdict", "--provider", "anthropic", "--model", "claude-opus-4-1",
                        "--input-tokens", "1", "--max-output-tokens", "1")  # fmt: skip
        assert result.code == 2
        assert "no price snapshot" in one_error_line(result)


# claude-sonnet-4-5 as genai-prices lists it: $3 in / $15 out, and above 200k
# input tokens $6 / $22.50, cache reads $0.30 → $0.60, 5-minute writes $3.75 → $7.50.
SONNET = ("--provider", "anthropic", "--model", "claude-sonnet-4-5")


class TestLongContextTiers:
    def test_show_lists_the_tiers(self, ledger):
        shown = ledger("prices", "show", "claude-sonnet-4-5", "--provider", "anthropic").json()
        assert (shown["input_per_mtok"], shown["output_per_mtok"]) == ("3", "15")
        assert shown["tiers"] == [
            {"above_input_tokens": 200_000, "input_per_mtok": "6", "output_per_mtok": "22.5",
             "cache_read_per_mtok": "0.6", "cache_write_per_mtok": "7.5",
             "cache_write_1h_per_mtok": "12"},
        ]  # fmt: skip

    @pytest.mark.parametrize(
        ("input_tokens", "micros"),
        [
            (200_000, 200_000 * 3 + 1000 * 15),  # at the threshold: still the base tier
            (200_001, 200_001 * 6 + 1000 * 45 // 2),  # past it: every token at the tier rate
        ],
    )
    def test_estimate_is_priced_at_the_tier_its_input_reaches(self, ledger, input_tokens, micros):
        result = ledger("verdict", *SONNET, "--input-tokens", str(input_tokens),
                        "--max-output-tokens", "1000")  # fmt: skip
        assert result.code == 0, result.stderr
        assert result.json()["estimated_micros"] == micros

    def test_record_counts_cached_input_toward_the_tier(self, ledger, home):
        """100k uncached + 60k cache writes + 50k cache reads = 210k input: the long tier."""
        usage = {"input_tokens": 100_000, "cache_creation_input_tokens": 60_000,
                 "cache_read_input_tokens": 50_000, "output_tokens": 2_000}  # fmt: skip
        result = ledger("record", *SONNET, "--usage-json", json.dumps(usage))
        assert result.code == 0, result.stderr
        # 100,000×6 + 60,000×7.5 + 50,000×0.6 + 2,000×22.5
        assert result.json()["actual_micros"] == 600_000 + 450_000 + 30_000 + 45_000
        payload = events_of(home, "budget.record_call")[0]["payload"]
        assert (payload["rates"]["input"], payload["rates"]["output"]) == ("6", "22.5")

    def test_record_below_the_threshold_pays_the_base_rates(self, ledger):
        usage = {"input_tokens": 150_000, "cache_read_input_tokens": 50_000, "output_tokens": 10}
        result = ledger("record", *SONNET, "--usage-json", json.dumps(usage))
        assert result.json()["actual_micros"] == 150_000 * 3 + 50_000 * 3 // 10 + 150

    def test_snapshot_of_the_format_without_tiers_is_refused(self, ledger, home):
        """An old snapshot would price long requests at the base rate: it is not used."""
        path = home / "prices" / "anthropic.json"
        document = json.loads(path.read_text())
        path.write_text(json.dumps({**document, "format": "ledger-prices/1"}))
        result = ledger("verdict", *SONNET, "--input-tokens", "1", "--max-output-tokens", "1")
        assert result.code == 2
        assert "ledger prices sync" in one_error_line(result)
        assert ledger("prices", "sync").code == 0
        assert ledger("verdict", *SONNET, "--input-tokens", "1",
                      "--max-output-tokens", "1").code == 0  # fmt: skip


class TestPriceConfig:
    @pytest.mark.parametrize(
        ("text", "key"),
        [
            (
                '[prices."anthropic/m"]\ninput_per_mtok = -1\noutput_per_mtok = 1\n',
                "input_per_mtok",
            ),
            ('[prices."anthropic/m"]\ninput_per_mtok = 1\n', "output_per_mtok: required"),
            ('[prices."anthropic/m"]\ninput_per_mtok = 1\noutput_per_mtok = 1\nfoo = 1\n', "foo"),
            (
                '[prices."Bad Provider/m"]\ninput_per_mtok = 1\noutput_per_mtok = 1\n',
                "Bad Provider/m",
            ),
        ],
    )
    def test_bad_overrides_exit_78_naming_the_key(self, ledger, home, text, key):
        add_config(home, "\n" + text)
        result = ledger("verdict", "0.01")
        assert result.code == 78
        assert key in one_error_line(result)
