"""Which endpoints are model calls, and each provider's error body."""

import pytest

from ledger.providers import Route, error_body, route


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
