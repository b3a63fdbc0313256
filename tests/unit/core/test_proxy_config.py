"""The [proxy] table: defaults, environment overrides, and every bad value named."""

import pytest

from ledger.core.config import from_mapping
from ledger.core.proxy_config import (
    CompatibleProvider,
    ListenAddress,
    ProxySettings,
    parse_listen,
)
from ledger.errors import ConfigError


class TestDefaults:
    def test_no_table_gives_the_documented_defaults(self):
        """Without [proxy]: no listen address (the daemon does not serve it), the public APIs."""
        settings = from_mapping({}, {}).proxy
        assert settings == ProxySettings()
        assert settings.listen is None
        assert settings.upstreams == {
            "anthropic": "https://api.anthropic.com",
            "openai": "https://api.openai.com",
            "google": "https://generativelanguage.googleapis.com",
        }
        assert settings.max_request_bytes == 32 * 1024 * 1024
        assert settings.upstream_timeout_seconds == 600
        assert settings.max_upstream_connections == 100
        assert settings.require_keys is False
        assert settings.passthrough == ()
        assert settings.default_max_output_tokens == 32_000
        assert settings.min_output_tokens == 1024
        assert settings.clamp is True


class TestCompatibleProviders:
    def test_a_provider_table_gives_its_url_and_key_variable(self):
        """[proxy.providers.<name>]: url (trailing slash dropped) and an optional key_env."""
        table = {
            "deepseek": {"url": "https://api.deepseek.com/", "key_env": "DEEPSEEK_API_KEY"},
            "local": {"url": "http://127.0.0.1:11434"},
        }
        settings = from_mapping({"proxy": {"providers": table}}, {}).proxy
        assert settings.providers == {
            "deepseek": CompatibleProvider("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
            "local": CompatibleProvider("http://127.0.0.1:11434", None),
        }
        override = '{"groq": {"url": "https://api.groq.com/openai"}}'
        env = from_mapping({}, {"LEDGER_PROXY_PROVIDERS": override}).proxy
        assert env.providers == {"groq": CompatibleProvider("https://api.groq.com/openai")}


class TestValues:
    def test_file_values_are_taken(self):
        """Every key of the table is read, the upstream table per provider."""
        settings = from_mapping(
            {
                "proxy": {
                    "listen": "127.0.0.1:9000",
                    "upstream": {"openai": "http://127.0.0.1:5000/"},
                    "passthrough": ["/v1/files"],
                    "max_request_bytes": 1024,
                    "upstream_timeout_seconds": 30,
                    "max_upstream_connections": 8,
                    "require_keys": True,
                }
            },
            {},
        ).proxy
        assert settings.listen == "127.0.0.1:9000"
        assert settings.upstreams["openai"] == "http://127.0.0.1:5000"
        assert settings.upstreams["anthropic"] == "https://api.anthropic.com"
        assert settings.passthrough == ("/v1/files",)
        assert (settings.max_request_bytes, settings.upstream_timeout_seconds) == (1024, 30)
        assert settings.max_upstream_connections == 8
        assert settings.require_keys is True

    def test_environment_overrides_the_file(self):
        """LEDGER_PROXY_* wins over the file; the list and the table are JSON."""
        settings = from_mapping(
            {"proxy": {"listen": "127.0.0.1:9000"}},
            {
                "LEDGER_PROXY_LISTEN": "127.0.0.1:9001",
                "LEDGER_PROXY_PASSTHROUGH": '["/v1/embeddings"]',
                "LEDGER_PROXY_UPSTREAM": '{"anthropic": "http://localhost:1"}',
                "LEDGER_PROXY_REQUIRE_KEYS": "true",
                "LEDGER_PROXY_MAX_REQUEST_BYTES": "10",
            },
        ).proxy
        assert settings.listen == "127.0.0.1:9001"
        assert settings.passthrough == ("/v1/embeddings",)
        assert settings.upstreams["anthropic"] == "http://localhost:1"
        assert settings.require_keys is True
        assert settings.max_request_bytes == 10

    @pytest.mark.parametrize(
        ("table", "named"),
        [
            ({"listen": "localhost"}, "proxy.listen"),
            ({"listen": "127.0.0.1:70000"}, "proxy.listen"),
            ({"listen": 8787}, "proxy.listen"),
            ({"upstream": {"mistral": "https://x"}}, "proxy.upstream.mistral"),
            ({"upstream": {"openai": "ftp://x"}}, "proxy.upstream.openai"),
            ({"passthrough": "/v1/files"}, "proxy.passthrough"),
            ({"passthrough": ["v1/files"]}, "proxy.passthrough"),
            ({"max_request_bytes": 0}, "proxy.max_request_bytes"),
            ({"upstream_timeout_seconds": -1}, "proxy.upstream_timeout_seconds"),
            ({"max_upstream_connections": 0}, "proxy.max_upstream_connections"),
            ({"require_keys": "yes"}, "proxy.require_keys"),
            ({"default_max_output_tokens": 0}, "proxy.default_max_output_tokens"),
            ({"min_output_tokens": "many"}, "proxy.min_output_tokens"),
            ({"clamp": "sometimes"}, "proxy.clamp"),
            ({"providers": {"Deep Seek": {"url": "https://x"}}}, "proxy.providers.Deep Seek"),
            ({"providers": {"openai": {"url": "https://x"}}}, "proxy.providers.openai"),
            ({"providers": {"v1": {"url": "https://x"}}}, "proxy.providers.v1"),
            ({"providers": {"deepseek": {}}}, "proxy.providers.deepseek.url"),
            ({"providers": {"deepseek": {"url": "x", "key": 1}}}, "proxy.providers.deepseek.key"),
            ({"providers": {"ds": {"url": "https://x", "key_env": "A B"}}}, "proxy.providers.ds"),
            ({"colour": "blue"}, "proxy.colour"),
        ],
    )
    def test_a_bad_value_is_a_config_error_naming_the_key(self, table, named):
        """Never a silent fallback: the message names the key."""
        with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
            from_mapping({"proxy": table}, {})

    def test_a_bad_environment_value_names_the_variable(self):
        """An override that is not JSON names its variable."""
        with pytest.raises(ConfigError, match="LEDGER_PROXY_PASSTHROUGH"):
            from_mapping({}, {"LEDGER_PROXY_PASSTHROUGH": "/v1/files"})


class TestListen:
    @pytest.mark.parametrize(
        ("text", "address", "loopback"),
        [
            ("127.0.0.1:8787", ListenAddress("127.0.0.1", 8787), True),
            ("localhost:80", ListenAddress("localhost", 80), True),
            ("[::1]:8787", ListenAddress("::1", 8787), True),
            ("0.0.0.0:8787", ListenAddress("0.0.0.0", 8787), False),  # noqa: S104
            ("10.0.0.5:8787", ListenAddress("10.0.0.5", 8787), False),
            ("gateway.internal:8787", ListenAddress("gateway.internal", 8787), False),
        ],
    )
    def test_addresses_and_whether_they_are_loopback(self, text, address, loopback):
        """Only loopback addresses count as private; any other host name may resolve anywhere."""
        parsed = parse_listen(text, "--listen")
        assert parsed == address
        assert parsed.is_loopback is loopback


class TestTls:
    def test_both_files_from_the_table_or_the_environment(self):
        """`tls_certfile` and `tls_keyfile` serve the gateway over TLS; LEDGER_PROXY_TLS_* too."""
        table = {
            "proxy": {"tls_certfile": "/etc/ledger/gw.pem", "tls_keyfile": "/etc/ledger/gw.key"}
        }
        settings = from_mapping(table, {}).proxy
        assert (settings.tls_certfile, settings.tls_keyfile) == (
            "/etc/ledger/gw.pem",
            "/etc/ledger/gw.key",
        )
        env = {"LEDGER_PROXY_TLS_CERTFILE": "/a.pem", "LEDGER_PROXY_TLS_KEYFILE": "/a.key"}
        assert from_mapping({}, env).proxy.tls_keyfile == "/a.key"

    @pytest.mark.parametrize(
        ("table", "said"),
        [
            (
                {"tls_certfile": "/gw.pem"},
                "proxy.tls_certfile and proxy.tls_keyfile: give both or neither",
            ),
            ({"tls_keyfile": "/gw.key"}, "give both or neither"),
            (
                {"tls_certfile": "", "tls_keyfile": "/gw.key"},
                "proxy.tls_certfile: must be the path of a PEM file",
            ),
        ],
    )
    def test_one_without_the_other_is_refused(self, table, said):
        with pytest.raises(ConfigError, match=said):
            from_mapping({"proxy": table}, {})
