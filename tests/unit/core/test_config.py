"""Config validation: env over file over default, and every bad value names its key."""

from fractions import Fraction

import pytest

from ledger.core.config import Config, from_mapping
from ledger.errors import ConfigError


class TestDefaults:
    def test_defaults_match_spec(self):
        """An empty file and environment give SPEC §1's defaults."""
        config = from_mapping({}, {})
        assert config == Config()
        assert config.daily_cap_micros is None
        assert config.warn_pct == 90
        assert config.reconcile_providers == ("aggregate",)
        assert config.snapshot_cron == "0 4 * * *"
        assert config.lock_timeout_seconds == 10


class TestPollSeconds:
    def test_default_is_240(self):
        """billing.poll_seconds defaults to 240 s (SPEC §1)."""
        assert from_mapping({}, {}).poll_seconds == 240

    @pytest.mark.parametrize("value", [0, 1, 3600])
    def test_zero_and_positive_integers_are_accepted(self, value):
        """Seconds are integers ≥ 0; 0 turns polling off."""
        assert from_mapping({"billing": {"poll_seconds": value}}, {}).poll_seconds == value

    def test_environment_overrides_the_file(self):
        """LEDGER_BILLING_POLL_SECONDS beats the file."""
        config = from_mapping(
            {"billing": {"poll_seconds": 600}}, {"LEDGER_BILLING_POLL_SECONDS": "0"}
        )
        assert config.poll_seconds == 0

    @pytest.mark.parametrize("value", [-1, 1.5, 240.0, "soon", "4m", True, [240]])
    def test_malformed_value_names_the_key(self, value):
        """A negative, fractional or non-numeric value is a ConfigError naming the key."""
        with pytest.raises(ConfigError, match=r"billing\.poll_seconds") as raised:
            from_mapping({"billing": {"poll_seconds": value}}, {})
        assert raised.value.exit_code == 78

    @pytest.mark.parametrize("value", ["-1", "1.5", "soon", ""])
    def test_malformed_environment_value_names_the_variable(self, value):
        """A bad override is a ConfigError naming LEDGER_BILLING_POLL_SECONDS."""
        with pytest.raises(ConfigError, match="LEDGER_BILLING_POLL_SECONDS") as raised:
            from_mapping({}, {"LEDGER_BILLING_POLL_SECONDS": value})
        assert raised.value.exit_code == 78


class TestExpectedProviders:
    def test_default_is_none_listed(self):
        """usd.providers is optional: by default only caps and prices name providers."""
        assert from_mapping({}, {}).expected_providers == ()

    def test_a_list_of_provider_ids(self):
        """The file's list, or the environment's JSON list, is kept in order."""
        assert from_mapping({"usd": {"providers": ["inhouse", "openai"]}}, {}).expected_providers == (
            "inhouse", "openai",
        )  # fmt: skip
        config = from_mapping({}, {"LEDGER_USD_PROVIDERS": '["acme"]'})
        assert config.expected_providers == ("acme",)

    @pytest.mark.parametrize("value", ["openai", ["Open AI"], [1], [], {"openai": 1}])
    def test_anything_else_names_the_key(self, value):
        """Not a list of provider ids: a ConfigError naming usd.providers."""
        with pytest.raises(ConfigError, match=r"usd\.providers"):
            from_mapping({"usd": {"providers": value}}, {})


class TestVerifyInterval:
    def test_default_is_a_day(self):
        """chain.verify_interval_hours defaults to 24."""
        assert from_mapping({}, {}).verify_interval_hours == 24

    @pytest.mark.parametrize("value", [0, 0.5, 24, "6"])
    def test_numbers_at_or_above_zero(self, value):
        """Any number ≥ 0; 0 turns the daemon's full verification off."""
        config = from_mapping({"chain": {"verify_interval_hours": value}}, {})
        assert config.verify_interval_hours == Fraction(str(value))

    @pytest.mark.parametrize("value", [-1, "soon", True, [1]])
    def test_anything_else_names_the_key(self, value):
        """A negative or non-numeric value is a ConfigError naming the key."""
        with pytest.raises(ConfigError, match=r"chain\.verify_interval_hours"):
            from_mapping({"chain": {"verify_interval_hours": value}}, {})


class TestOverrides:
    def test_env_beats_file(self):
        """LEDGER_<SECTION>_<KEY> overrides the file."""
        config = from_mapping({"usd": {"daily_cap": 10}}, {"LEDGER_USD_DAILY_CAP": "12.5"})
        assert config.daily_cap_micros == 12_500_000

    def test_structured_values_come_as_json(self):
        """Lists and tables in the environment are JSON."""
        config = from_mapping(
            {},
            {
                "LEDGER_OBSERVER_COMMAND": '["/bin/obs", "--x"]',
                "LEDGER_USD_PROVIDER_CAPS": '{"openai": 5}',
                "LEDGER_RECONCILE_PROVIDERS": '["aggregate", "openai"]',
            },
        )
        assert config.observer_command == ("/bin/obs", "--x")
        assert config.provider_caps_micros == {"openai": 5_000_000}
        assert config.reconcile_providers == ("aggregate", "openai")

    def test_unrelated_ledger_variables_are_ignored(self):
        """LEDGER_* names that are no key are not errors."""
        assert from_mapping({}, {"LEDGER_HOME": "/x", "LEDGER_NOW": "y", "LEDGER_FOO": "z"})

    def test_money_is_exact(self):
        """0.1 + 0.2 style float error cannot enter: caps become exact micro-USD."""
        assert from_mapping({"usd": {"daily_cap": 0.3}}, {}).daily_cap_micros == 300_000
        assert from_mapping({"usd": {"warn_pct": 90.5}}, {}).warn_pct == Fraction(181, 2)


class TestErrors:
    @pytest.mark.parametrize(
        ("document", "environ", "key"),
        [
            ({"usd": {"daily_cap": -1}}, {}, "usd.daily_cap"),
            ({"usd": {"daily_cap": "lots"}}, {}, "usd.daily_cap"),
            ({"usd": {"warn_pct": 101}}, {}, "usd.warn_pct"),
            ({"billing": {"stale_halt_pct": -0.1}}, {}, "billing.stale_halt_pct"),
            ({"billing": {"stale_seconds": 1.5}}, {}, "billing.stale_seconds"),
            ({"billing": {"stale_seconds": -1}}, {}, "billing.stale_seconds"),
            ({"billing": {"stale_seconds": True}}, {}, "billing.stale_seconds"),
            ({"reconcile": {"interval_hours": 0}}, {}, "reconcile.interval_hours"),
            ({"observer": {"command": "obs"}}, {}, "observer.command"),
            ({"reconcile": {"providers": ["Bad"]}}, {}, "reconcile.providers"),
            ({"usd": {"provider_caps": {"Open AI": 1}}}, {}, "usd.provider_caps"),
            ({"snapshot": {"cron": "daily"}}, {}, "snapshot.cron"),
            ({"usd": {"nope": 1}}, {}, "usd.nope"),
            ({"nope": {}}, {}, "[nope]"),
            ({}, {"LEDGER_USD_DAILY_CAP": "x"}, "LEDGER_USD_DAILY_CAP"),
            ({}, {"LEDGER_OBSERVER_COMMAND": "[oops"}, "LEDGER_OBSERVER_COMMAND"),
            ({}, {"LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS": "-3"}, "LEDGER_CHAIN_LOCK_TIMEOUT_SECONDS"),
        ],
    )
    def test_bad_value_names_its_key(self, document, environ, key):
        """A malformed or out-of-range value is a ConfigError naming the key, never a fallback."""
        with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
            from_mapping(document, environ)
