"""Who is calling, and what of the request crosses to the upstream."""

import pytest

from ledger.core.proxy_config import ProxySettings
from ledger.gateway.caller import (
    Caller,
    CallerRefusedError,
    presented_key,
    provider_credentials,
    resolve_caller,
)
from ledger.gateway.relay import halt_message, upstream_headers


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
        )
        assert caller == Caller(
            agent="research", session="s-9", tags=("team-a", "nightly"), key_name=None,
            credentials={"x-api-key": "sk-1"},
        )  # fmt: skip

    def test_required_gateway_keys_refuse_every_request_with_401(self):
        """proxy.require_keys on: no request passes without an accepted gateway key."""
        with pytest.raises(CallerRefusedError) as refused:
            resolve_caller({"authorization": "Bearer sk-1"}, ProxySettings(require_keys=True))
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
            resolve_caller(headers, ProxySettings())
        assert refused.value.status == 400


class TestUpstreamHeaders:
    def test_hop_by_hop_ledger_and_connection_listed_headers_stay_behind(self):
        """RFC 9110 §7.6.1: connection-specific fields are not forwarded; neither is x-ledger-*."""
        caller = resolve_caller({"x-api-key": "sk-1"}, ProxySettings())
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
        assert provider_credentials("google", environ) == {"x-goog-api-key": "g-1"}
        assert provider_credentials("deepseek", environ, "DEEPSEEK_API_KEY") == {
            "authorization": "Bearer d-1"
        }
        with pytest.raises(CallerRefusedError, match="DEEPSEEK_API_KEY") as caught:
            provider_credentials("deepseek", {}, "DEEPSEEK_API_KEY")
        assert caught.value.status == 503

    def test_a_gateway_key_in_x_goog_api_key_is_presented(self):
        """Gemini clients put their key in x-goog-api-key: a gateway key there is found."""
        assert presented_key({"x-goog-api-key": "lk_abc"}) == "lk_abc"
        assert presented_key({"x-goog-api-key": "AIza-provider-key"}) is None
