"""Who is calling, and what of the request crosses to the upstream."""

import pytest

from ledger.core.gateway_keys import GatewayKey
from ledger.core.proxy_config import ProxySettings
from ledger.gateway.caller import (
    Caller,
    CallerRefusedError,
    credential_for,
    gateway_credentials,
    presented_key,
    resolve_caller,
)
from ledger.gateway.relay import halt_message, upstream_headers
from ledger.providers.credentials import CREDENTIALS, compatible_credential, forwarded_query


class TestResolveCaller:
    def test_the_callers_own_credentials_and_names_are_taken(self):
        """Without gateway keys: the caller's key is forwarded, its headers name it."""
        caller = resolve_caller(
            {
                "x-api-key": "sk-1",
                "x-ledger-agent": "research",
                "x-ledger-session": "s-9",
                "x-ledger-tags": "team-a, nightly",
            },
            ProxySettings(),
            CREDENTIALS["anthropic"],
        )
        assert caller == Caller(
            agent="research", session="s-9", tags=("team-a", "nightly"), key_name=None,
            credentials={"x-api-key": "sk-1"},
        )  # fmt: skip

    def test_required_gateway_keys_refuse_every_request_with_401(self):
        """proxy.require_keys on: no request passes without an accepted gateway key."""
        with pytest.raises(CallerRefusedError) as refused:
            resolve_caller(
                {"authorization": "Bearer sk-1"},
                ProxySettings(require_keys=True),
                CREDENTIALS["openai"],
            )
        assert refused.value.status == 401

    @pytest.mark.parametrize(
        "headers",
        [
            {"x-ledger-agent": "a" * 300},
            {"x-ledger-session": "line\nbreak"},
            {"x-ledger-tags": "ok, not ok"},
            {"x-ledger-tags": ",".join(f"t{n}" for n in range(17))},
        ],
    )
    def test_a_malformed_ledger_header_is_400(self, headers):
        """A name the chain could not hold is refused, never silently dropped."""
        with pytest.raises(CallerRefusedError) as refused:
            resolve_caller(headers, ProxySettings(), CREDENTIALS["openai"])
        assert refused.value.status == 400


class TestUpstreamHeaders:
    def test_hop_by_hop_ledger_and_connection_listed_headers_stay_behind(self):
        """RFC 9110 §7.6.1: connection-specific fields are not forwarded; neither is x-ledger-*."""
        caller = resolve_caller({"x-api-key": "sk-1"}, ProxySettings(), CREDENTIALS["anthropic"])
        sent = dict(
            upstream_headers(
                [("host", "gw"), ("connection", "x-trace, keep-alive"), ("x-trace", "1"),
                 ("keep-alive", "5"), ("x-ledger-agent", "a"), ("x-api-key", "sk-1"),
                 ("accept-encoding", "gzip"), ("anthropic-version", "2023-06-01")],
                caller,
            )
        )  # fmt: skip
        assert sent == {
            "x-api-key": "sk-1", "anthropic-version": "2023-06-01", "accept-encoding": "identity",
        }  # fmt: skip


def test_a_halt_message_gives_verdict_reason_cap_and_figures():
    """The 402 message names everything a caller needs to see why nothing was sent."""
    message = halt_message(
        {
            "verdict": "halt-uncertainty",
            "uncertainty_reason": "billing_stale",
            "deciding_cap": "provider:openai",
            "usd_used_micros": 4_500_000,
            "usd_reserved_micros": 120_000,
            "daily_cap_micros": 5_000_000,
            "estimated_micros": 35_400,
            "verdict_ref": "ab" * 32,
        }
    )
    assert message == (
        "ledger: halt-uncertainty (billing_stale): the deciding cap provider:openai of $5.00 "
        "has $4.50 used and $0.12 reserved, and this call's estimate is $0.0354; "
        "the request was not sent (verdict abababababab)"
    )


class TestProviderCredentials:
    def test_each_provider_gets_its_own_header_and_variable(self):
        """Gemini's key goes as x-goog-api-key; an OpenAI-compatible one from its key_env."""
        environ = {"GEMINI_API_KEY": "g-1", "DEEPSEEK_API_KEY": "d-1"}
        google = credential_for("google", ProxySettings())
        assert gateway_credentials("google", google, environ) == {"x-goog-api-key": "g-1"}
        deepseek = compatible_credential("DEEPSEEK_API_KEY")
        assert gateway_credentials("deepseek", deepseek, environ) == {"authorization": "Bearer d-1"}
        with pytest.raises(CallerRefusedError, match="DEEPSEEK_API_KEY") as caught:
            gateway_credentials("deepseek", deepseek, {})
        assert caught.value.status == 503
        assert gateway_credentials("local", compatible_credential(None), {}) == {}

    @pytest.mark.parametrize(
        ("headers", "query"),
        [
            ({"x-goog-api-key": "lk_abc"}, []),
            ({"x-api-key": "lk_abc"}, []),
            ({"authorization": "Bearer lk_abc"}, []),
            ({}, [("key", "lk_abc")]),
        ],
    )
    def test_a_gateway_key_is_found_wherever_a_client_puts_a_key(self, headers, query):
        """x-api-key, Authorization: Bearer, x-goog-api-key and ?key= all present one."""
        assert presented_key(headers, query) == "lk_abc"

    def test_a_provider_key_is_no_gateway_key_and_two_gateway_keys_are_refused(self):
        assert presented_key({"x-goog-api-key": "AIza-provider-key"}, [("key", "AIza")]) is None
        with pytest.raises(CallerRefusedError) as caught:
            presented_key({"x-api-key": "lk_one"}, [("key", "lk_two")])
        assert caught.value.status == 401

    def test_a_callers_own_key_crosses_only_in_its_providers_headers(self):
        """Without gateway keys: an Anthropic x-api-key never reaches Google, nor ?key= OpenAI."""
        headers = {"x-api-key": "sk-ant", "x-goog-api-key": "AIza", "authorization": "Bearer o"}
        google = resolve_caller(headers, ProxySettings(), CREDENTIALS["google"])
        assert google.credentials == {"x-goog-api-key": "AIza", "authorization": "Bearer o"}
        anthropic = resolve_caller(headers, ProxySettings(), CREDENTIALS["anthropic"])
        assert anthropic.credentials == {"x-api-key": "sk-ant", "authorization": "Bearer o"}
        query = [("alt", "sse"), ("key", "AIza")]
        assert forwarded_query(query, CREDENTIALS["google"], own_key=True) == query
        assert forwarded_query(query, CREDENTIALS["openai"], own_key=True) == [("alt", "sse")]
        assert forwarded_query(query, CREDENTIALS["google"], own_key=False) == [("alt", "sse")]


def _key(agent: str | None = None, tags: tuple[str, ...] = ()) -> GatewayKey:
    return GatewayKey("ci", agent, tags, None, "2026-06-01T00:00:00Z", None, "0" * 64)


class TestGatewayKeyIdentity:
    def test_a_key_without_an_agent_is_its_own_names_agent(self):
        """An older key issued without --agent cannot leave the agent to its holder."""
        caller = resolve_caller({}, ProxySettings(), CREDENTIALS["openai"], _key(), {})
        assert caller.agent == "ci"

    @pytest.mark.parametrize(
        ("key", "headers"),
        [
            (_key(), {"x-ledger-agent": "someone-else"}),
            (_key("bot"), {"x-ledger-agent": "other"}),
            (_key("bot", ("team-a",)), {"x-ledger-tags": "team-b"}),
        ],
    )
    def test_claiming_another_agent_or_tag_is_403(self, key, headers):
        with pytest.raises(CallerRefusedError) as caught:
            resolve_caller(headers, ProxySettings(), CREDENTIALS["openai"], key, {})
        assert caught.value.status == 403

    def test_claiming_the_keys_own_agent_is_accepted(self):
        caller = resolve_caller(
            {"x-ledger-agent": "ci"}, ProxySettings(), CREDENTIALS["openai"], _key(), {}
        )
        assert caller.agent == "ci"
