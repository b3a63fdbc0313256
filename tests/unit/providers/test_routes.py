"""Which endpoints are model calls, and each provider's error body."""

import pytest

from ledger.providers import Route, client_route, error_body, route


class TestRoute:
    @pytest.mark.parametrize(
        ("method", "path", "expected"),
        [
            ("POST", "/v1/messages", Route("anthropic", "messages")),
            ("POST", "/v1/chat/completions", Route("openai", "chat_completions")),
            ("POST", "/v1/responses", Route("openai", "responses")),
            ("POST", "/v1/messages/count_tokens", Route("anthropic", "free")),
            ("GET", "/v1/models", Route("anthropic", "free")),
            ("post", "/v1/messages", Route("anthropic", "messages")),
        ],
    )
    def test_known_endpoints(self, method, path, expected):
        """The three model endpoints are gated; count_tokens and the model list are free."""
        assert route(method, path) == expected

    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("GET", "/v1/messages"),
            ("POST", "/v1/messages/batches"),
            ("POST", "/v1/messages/"),
            ("POST", "/v1/completions"),
            ("POST", "/v1/embeddings"),
            ("GET", "/v1/models/gpt-4.1"),
            ("POST", "/v1/models"),
            ("POST", "/v1//messages"),
        ],
    )
    def test_anything_else_is_unknown(self, method, path):
        """A paid endpoint not named (batches, embeddings) is never taken for a free one."""
        assert route(method, path) is None

    def test_only_model_routes_are_model_calls(self):
        """The free routes are not gated."""
        assert Route("anthropic", "messages").is_model_call
        assert not Route("anthropic", "free").is_model_call


class TestErrorBody:
    def test_anthropic_shape(self):
        """Anthropic: {"type": "error", "error": {"type", "message"}}."""
        assert error_body("anthropic", "budget_exceeded", "halt-100") == {
            "type": "error",
            "error": {"type": "budget_exceeded", "message": "halt-100"},
        }

    def test_openai_shape(self):
        """OpenAI: {"error": {"type", "code", "message"}}."""
        assert error_body("openai", "budget_exceeded", "halt-100") == {
            "error": {"type": "budget_exceeded", "code": "budget_exceeded", "message": "halt-100"}
        }


class TestClientRoute:
    @pytest.mark.parametrize(
        ("provider", "path", "kind"),
        [
            ("anthropic", "/v1/messages", "messages"),
            ("anthropic", "/gateway/v1/messages", "messages"),
            ("openai", "/v1/chat/completions", "chat_completions"),
            ("openai", "/openai/deployments/d/chat/completions", "chat_completions"),
            ("openai", "/v1/responses", "responses"),
        ],
    )
    def test_model_endpoints_under_any_prefix(self, provider, path, kind):
        """A base URL with a path of its own still reaches the gate."""
        assert client_route(provider, "POST", path) == Route(provider, kind)

    @pytest.mark.parametrize(
        ("provider", "method", "path"),
        [
            ("anthropic", "POST", "/v1/messages/count_tokens"),
            ("anthropic", "POST", "/v1/messages/batches"),
            ("anthropic", "GET", "/v1/messages"),
            ("anthropic", "POST", "/v1/chat/completions"),
            ("openai", "POST", "/v1/threads/t/messages"),
            ("openai", "POST", "/v1/responses/input_tokens"),
            ("openai", "POST", "/v1/responses/r/cancel"),
            ("openai", "GET", "/v1/chat/completions"),
        ],
    )
    def test_other_requests_are_not_model_calls(self, provider, method, path):
        """Free endpoints and the other provider's paths pass ungated."""
        assert client_route(provider, method, path) is None
