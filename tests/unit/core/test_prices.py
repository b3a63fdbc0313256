"""Exact token pricing and usage objects (SPEC §7): golden micro-USD, computed by hand."""

import json
from fractions import Fraction

import pytest

from ledger.core.price_table import match, parse_provider_file, quote
from ledger.core.prices import (
    CONFIG_SOURCE,
    PriceError,
    Rates,
    TokenCounts,
    cost_micros,
    estimate_micros,
    fraction_text,
    quote_cost_micros,
    quote_estimate_micros,
)
from ledger.core.rate_tables import rates_from
from ledger.core.usage_objects import UsageObjectError, usage_tokens

# claude-opus-4-1 as Anthropic lists it: $15 in, $75 out, $1.50 cache read,
# $18.75 5-minute cache write, $30 one-hour cache write (per million tokens).
OPUS = Rates(Fraction(15), Fraction(75), Fraction(3, 2), Fraction(75, 4), Fraction(30))
# gpt-4o: $2.50 in, $10 out, $1.25 cached input.
GPT4O = Rates(Fraction(5, 2), Fraction(10), Fraction(5, 4), Fraction(5, 2), Fraction(5, 2))


class TestAnthropicGolden:
    def test_cache_writes_5m_and_1h_reads_and_output(self):
        """1000×15 + 2000×18.75 + 1000×30 + 5000×1.5 + 700×75 = 142,500 µ$."""
        usage = {
            "input_tokens": 1000,
            "cache_creation_input_tokens": 3000,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 2000,
                "ephemeral_1h_input_tokens": 1000,
            },
            "cache_read_input_tokens": 5000,
            "output_tokens": 700,
            "service_tier": "standard",
        }
        tokens = usage_tokens("anthropic", usage)
        assert tokens == TokenCounts(
            input=1000, cache_write_5m=2000, cache_write_1h=1000, cache_read=5000, output=700
        )
        assert cost_micros(tokens, OPUS) == 142_500

    def test_unsplit_cache_writes_are_5_minute_writes(self):
        """1000×15 + 3000×18.75 + 5000×1.5 + 700×75 = 131,250 µ$."""
        usage = {
            "input_tokens": 1000,
            "cache_creation_input_tokens": 3000,
            "cache_read_input_tokens": 5000,
            "output_tokens": 700,
        }
        assert cost_micros(usage_tokens("anthropic", usage), OPUS) == 131_250

    def test_split_that_leaves_writes_unassigned_prices_them_as_5_minute(self):
        usage = {
            "input_tokens": 0,
            "cache_creation_input_tokens": 3000,
            "cache_creation": {"ephemeral_1h_input_tokens": 1000},
            "output_tokens": 0,
        }
        tokens = usage_tokens("anthropic", usage)
        assert (tokens.cache_write_5m, tokens.cache_write_1h) == (2000, 1000)
        assert cost_micros(tokens, OPUS) == 2000 * 18.75 + 1000 * 30

    def test_null_optional_fields_count_zero(self):
        usage = {
            "input_tokens": 10,
            "output_tokens": 2,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
            "cache_creation": None,
        }
        assert cost_micros(usage_tokens("anthropic", usage), OPUS) == 10 * 15 + 2 * 75


class TestOpenAIGolden:
    def test_chat_cached_prompt_and_reasoning_are_each_priced_once(self):
        """800×2.5 + 1200×1.25 + 500×10 = 8,500 µ$ (cached never again as input,
        reasoning never again as output)."""
        usage = {
            "prompt_tokens": 2000,
            "completion_tokens": 500,
            "total_tokens": 2500,
            "prompt_tokens_details": {"cached_tokens": 1200, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 200},
        }
        tokens = usage_tokens("openai", usage)
        assert tokens == TokenCounts(input=800, cache_read=1200, output=500, reasoning=200)
        assert cost_micros(tokens, GPT4O) == 8_500

    def test_responses_usage(self):
        """(3000−1000)×2.5 + 1000×1.25 + 900×10 = 15,250 µ$."""
        usage = {
            "input_tokens": 3000,
            "input_tokens_details": {"cached_tokens": 1000},
            "output_tokens": 900,
            "output_tokens_details": {"reasoning_tokens": 600},
            "total_tokens": 3900,
        }
        assert cost_micros(usage_tokens("openai", usage), GPT4O) == 15_250


class TestRounding:
    def test_rounded_up_once_at_the_end(self):
        """3×0.8 + 3×0.08 = 2.64 µ$ → 3 (rounding each kind up would give 4)."""
        haiku = rates_from({"input": "0.8", "output": "4", "cache_read": "0.08"})
        assert cost_micros(TokenCounts(input=3, cache_read=3), haiku) == 3

    def test_estimate_is_input_plus_max_output(self):
        assert estimate_micros(1200, 800, OPUS) == 1200 * 15 + 800 * 75

    def test_zero_tokens_cost_nothing(self):
        assert cost_micros(TokenCounts(), OPUS) == 0


class TestBadUsage:
    @pytest.mark.parametrize(
        ("provider", "usage", "message"),
        [
            ("anthropic", {"output_tokens": 1}, "lacks input_tokens"),
            ("anthropic", {"input_tokens": -1, "output_tokens": 1}, "input_tokens: negative"),
            ("anthropic", {"input_tokens": 1.5, "output_tokens": 1}, "not an integer"),
            ("anthropic", {"input_tokens": True, "output_tokens": 1}, "not an integer"),
            (
                "anthropic",
                {
                    "input_tokens": 1,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 10,
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": 8,
                        "ephemeral_1h_input_tokens": 5,
                    },
                },
                "larger than cache_creation_input_tokens",
            ),
            ("openai", {"completion_tokens": 1}, "lacks prompt_tokens"),
            (
                "openai",
                {
                    "prompt_tokens": 10,
                    "completion_tokens": 1,
                    "prompt_tokens_details": {"cached_tokens": 11},
                },
                "cached_tokens (11) is larger than prompt_tokens (10)",
            ),
            (
                "openai",
                {
                    "input_tokens": 5,
                    "output_tokens": 2,
                    "total_tokens": 7,
                    "output_tokens_details": {"reasoning_tokens": 3},
                },
                "reasoning_tokens (3) is larger than output_tokens (2)",
            ),
            ("openai", [1, 2], "not a JSON object"),
            ("mistral", {"input_tokens": 1}, "lacks output_tokens"),
            ("google", {"candidatesTokenCount": 1}, "lacks promptTokenCount"),
            (
                "google",
                {"promptTokenCount": 5, "cachedContentTokenCount": 6},
                "cachedContentTokenCount (6) is larger than promptTokenCount (5)",
            ),
        ],
    )
    def test_rejected_with_the_field_named(self, provider, usage, message):
        with pytest.raises(UsageObjectError, match=message.replace("(", r"\(").replace(")", r"\)")):
            usage_tokens(provider, usage)

    def test_gemini_usage_metadata_counts_thoughts_as_output_and_cache_apart(self):
        """promptTokenCount includes the cached part; thoughts are billed as output."""
        usage = {
            "promptTokenCount": 1200, "cachedContentTokenCount": 200,
            "toolUsePromptTokenCount": 30, "candidatesTokenCount": 80,
            "thoughtsTokenCount": 400, "totalTokenCount": 1710,
        }  # fmt: skip
        tokens = usage_tokens("google", usage)
        assert (tokens.input, tokens.cache_read, tokens.output, tokens.reasoning) == (
            1030, 200, 480, 400,
        )  # fmt: skip

    def test_another_provider_is_read_as_openai_compatible(self):
        """An OpenAI-compatible provider (DeepSeek, a local vLLM) reports OpenAI's usage."""
        usage = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
        assert usage_tokens("deepseek", usage) == usage_tokens("openai", usage)

    def test_anthropic_shape_given_as_openai_names_the_missing_field(self):
        usage = {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 0}
        # No prompt_tokens: read as a Responses object, which it is not either.
        tokens = usage_tokens("openai", usage)
        assert tokens.input == 5  # the Responses shape has exactly these two fields
        with pytest.raises(UsageObjectError, match="lacks input_tokens"):
            usage_tokens("anthropic", {"prompt_tokens": 5, "completion_tokens": 1})


class TestRates:
    def test_cache_rates_default_to_input_and_1h_to_5m_write(self):
        rates = rates_from({"input_per_mtok": 3, "output_per_mtok": 15.0}, suffix="_per_mtok")
        assert rates == Rates(Fraction(3), Fraction(15), Fraction(3), Fraction(3), Fraction(3))
        rates = rates_from({"input": "3", "output": "15", "cache_write": "3.75"})
        assert rates.cache_write_1h == Fraction(15, 4)

    @pytest.mark.parametrize("bad", ["-1", "abc", "inf", "nan", True, None, [1]])
    def test_bad_rates_are_refused(self, bad):
        with pytest.raises(PriceError):
            rates_from({"input": bad, "output": "1"}) if bad is not None else rates_from(
                {"output": "1"}
            )

    def test_rate_text_is_exact(self):
        assert fraction_text(Fraction(75, 4)) == "18.75"
        assert fraction_text(Fraction(15)) == "15"
        assert fraction_text(Fraction(1, 100_000)) == "0.00001"


def _provider_file(models, provider="anthropic", fallback=()):
    return json.dumps(
        {
            "format": "ledger-prices/3",
            "provider": provider,
            "source": "genai-prices 9.9",
            "taken_at": "2026-03-01T00:00:00.000000Z",
            "fallback": list(fallback),
            "models": models,
        }
    ).encode()


MODELS = [
    {
        "id": "claude-opus-4-1",
        "match": {"or": [{"equals": "claude-opus-4-1"}, {"starts_with": "claude-opus-4-1-"}]},
        "rates": {"input": "15", "output": "75", "cache_read": "1.5"},
    },
    {
        "id": "claude-x",
        "match": {"regex": "^claude-x(-\\d+)?$"},
        "rates": {"input": "1", "output": "2"},
    },
]


class TestSnapshotLookup:
    def loader(self, files):
        return lambda name: parse_provider_file(files[name], name) if name in files else None

    def test_dated_names_match_the_library_rules(self):
        load = self.loader({"anthropic": _provider_file(MODELS)})
        found = quote("anthropic", "claude-opus-4-1-20250805", {}, load)
        assert found is not None
        assert found.source == "genai-prices 9.9"
        assert found.rates.cache_read == Fraction(3, 2)
        assert quote("anthropic", "claude-x-7", {}, load) is not None
        assert quote("anthropic", "claude-unknown", {}, load) is None
        assert quote("openai", "gpt-4o", {}, load) is None

    def test_override_wins_by_exact_name_or_library_id(self):
        load = self.loader({"anthropic": _provider_file(MODELS)})
        own = Rates(*(Fraction(1),) * 5)
        by_id = quote(
            "anthropic", "claude-opus-4-1-20250805", {"anthropic/claude-opus-4-1": own}, load
        )
        assert by_id is not None
        assert (by_id.rates, by_id.source) == (own, CONFIG_SOURCE)
        exact = quote("anthropic", "my-model", {"anthropic/my-model": own}, load)
        assert exact is not None
        assert exact.source == CONFIG_SOURCE

    def test_fallback_provider_is_tried_once(self):
        files = {
            "google": _provider_file([], provider="google", fallback=["anthropic"]),
            "anthropic": _provider_file(MODELS),
        }
        found = quote("google", "claude-opus-4-1", {}, self.loader(files))
        assert found is not None
        assert found.rates.input == 15

    def test_malformed_snapshot_is_an_error_not_zero(self):
        with pytest.raises(PriceError):
            parse_provider_file(b"{", "anthropic")
        with pytest.raises(PriceError):
            parse_provider_file(_provider_file([], provider="openai"), "anthropic")
        with pytest.raises(PriceError):
            match({"glob": "x"}, "x")


SONNET_BASE = Rates(Fraction(3), Fraction(15), Fraction(3, 10), Fraction(15, 4), Fraction(6))
SONNET_LONG = Rates(Fraction(6), Fraction(45, 2), Fraction(3, 5), Fraction(15, 2), Fraction(12))
TIERED_MODELS = [
    {
        "id": "claude-sonnet-4-5",
        "match": {"starts_with": "claude-sonnet-4-5"},
        "rates": {"input": "3", "output": "15", "cache_read": "0.3", "cache_write": "3.75",
                  "cache_write_1h": "6"},
        "tiers": [{"above": 200_000, "rates": {"input": "6", "output": "22.5", "cache_read": "0.6",
                                               "cache_write": "7.5", "cache_write_1h": "12"}}],
    },
]  # fmt: skip


class TestTiers:
    def sonnet(self, overrides=None):
        load = TestSnapshotLookup().loader({"anthropic": _provider_file(TIERED_MODELS)})
        found = quote("anthropic", "claude-sonnet-4-5-20250929", overrides or {}, load)
        assert found is not None
        return found

    def test_tier_starts_above_its_threshold(self):
        """genai-prices' cliff: more than 200,000 input tokens, not 200,000 itself."""
        found = self.sonnet()
        assert found.rates_for(0) == SONNET_BASE
        assert found.rates_for(200_000) == SONNET_BASE
        assert found.rates_for(200_001) == SONNET_LONG

    def test_every_input_kind_counts_toward_the_tier(self):
        """Cache reads and writes are input: 150k + 30k + 20k + 1 crosses 200k."""
        tokens = TokenCounts(input=150_000, cache_write_5m=30_000, cache_read=20_001, output=10)
        assert tokens.total_input == 200_001
        micros, rates = quote_cost_micros(tokens, self.sonnet())
        assert rates == SONNET_LONG
        # 150,000×6 + 30,000×7.5 + 20,001×0.6 + 10×22.5 = 900,000 + 225,000 + 12,000.6 + 225
        assert micros == 1_137_226

    def test_estimate_uses_the_tier_of_its_input(self):
        """1000 output tokens of a 250k-token request: every token at the long rates."""
        micros, _rates = quote_estimate_micros(250_000, 1000, self.sonnet())
        assert micros == 250_000 * 6 + 22_500

    def test_an_override_is_one_flat_price(self):
        """The operator's price replaces the library's tiers too."""
        own = Rates(*(Fraction(1),) * 5)
        found = self.sonnet({"anthropic/claude-sonnet-4-5": own})
        assert found.tiers == ()
        assert found.rates_for(10**6) == own

    @pytest.mark.parametrize(
        ("tiers", "message"),
        [
            ("x", "tiers: must be a list"),
            ([{"rates": {"input": "1", "output": "1"}}], "above: must be an integer"),
            ([{"above": -1, "rates": {"input": "1", "output": "1"}}], "above: must be an integer"),
            ([{"above": 5}], "rates: must be an object"),
            ([{"above": 5, "rates": {"output": "1"}}], "input: required"),
            (
                [{"above": 5, "rates": {"input": "1", "output": "1"}},
                 {"above": 5, "rates": {"input": "2", "output": "2"}}],
                "tiers must ascend",
            ),
        ],
    )  # fmt: skip
    def test_malformed_tiers_are_refused(self, tiers, message):
        models = [{**TIERED_MODELS[0], "tiers": tiers}]
        load = TestSnapshotLookup().loader({"anthropic": _provider_file(models)})
        with pytest.raises(PriceError, match=message):
            quote("anthropic", "claude-sonnet-4-5", {}, load)

    @pytest.mark.parametrize("older", ["ledger-prices/1", "ledger-prices/2"])
    def test_an_older_snapshot_is_refused(self, older):
        """One written before tiers, modalities and service tiers would under-price calls."""
        raw = _provider_file(MODELS).replace(b"ledger-prices/3", older.encode())
        with pytest.raises(PriceError, match="not in format ledger-prices/3"):
            parse_provider_file(raw, "anthropic")
