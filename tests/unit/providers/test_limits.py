"""Each wire format's output limit: read, written, and the thinking budgets below it."""

import json

import pytest

from ledger.providers import Route, estimate_request
from ledger.providers.limits import RequestRefused, limited_body, read_output_limit


def test_a_default_limit_is_used_only_when_none_is_stated():
    """Without a default a request with no limit is refused; with one it is estimated at it."""
    body = json.dumps({"model": "m", "messages": []}).encode()
    with pytest.raises(RequestRefused, match="no output limit"):
        estimate_request(Route("anthropic", "messages"), body)
    estimate = estimate_request(Route("anthropic", "messages"), body, default_output_limit=900)
    assert (estimate.max_output_tokens, estimate.limit_given) == (900, False)
    stated = json.dumps({"model": "m", "max_tokens": 5, "messages": []}).encode()
    given = estimate_request(Route("anthropic", "messages"), stated, default_output_limit=900)
    assert (given.max_output_tokens, given.limit_given) == (5, True)


def test_gemini_reads_generation_config():
    """Gemini states its limit in generationConfig.maxOutputTokens."""
    assert read_output_limit("generate_content", {"generationConfig": {"maxOutputTokens": 8}}) == 8
    assert read_output_limit("generate_content", {"contents": []}) is None
    with pytest.raises(RequestRefused, match="maxOutputTokens"):
        read_output_limit("generate_content", {"generationConfig": {"maxOutputTokens": -1}})


class TestWritten:
    def test_anthropic_thinking_budget_stays_below_max_tokens(self):
        """budget_tokens is lowered under the limit, or thinking turned off below 1,025."""
        document = {"max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 31999}}
        assert json.loads(limited_body("messages", document, 5000)) == {
            "max_tokens": 5000, "thinking": {"type": "enabled", "budget_tokens": 4999},
        }  # fmt: skip
        small = {"max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 2000}}
        assert json.loads(limited_body("messages", small, 1024))["thinking"] == {"type": "disabled"}
        kept = {"max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 2000}}
        assert json.loads(limited_body("messages", kept, 9000))["thinking"]["budget_tokens"] == 2000

    def test_chat_sets_every_field_given_or_the_one_chosen(self):
        """Both old and new fields are lowered; a request without either gets the chosen one."""
        both = {"max_tokens": 900, "max_completion_tokens": 800}
        assert json.loads(limited_body("chat_completions", both, 100)) == {
            "max_tokens": 100, "max_completion_tokens": 100,
        }  # fmt: skip
        assert json.loads(limited_body("chat_completions", {}, 7, chat_field="max_tokens")) == {
            "max_tokens": 7
        }

    def test_responses_and_reasoning_budgets(self):
        """max_output_tokens is set; a router's reasoning.max_tokens is lowered below it."""
        document = {"reasoning": {"effort": "high", "max_tokens": 50_000}, "store": False}
        assert json.loads(limited_body("responses", document, 3000)) == {
            "reasoning": {"effort": "high", "max_tokens": 2999},
            "store": False,
            "max_output_tokens": 3000,
        }

    def test_gemini_thinking_budget_is_lowered_to_the_limit(self):
        """generationConfig is created when absent; thinkingBudget never exceeds the limit."""
        assert json.loads(limited_body("generate_content", {"contents": []}, 64)) == {
            "contents": [], "generationConfig": {"maxOutputTokens": 64},
        }  # fmt: skip
        document = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 24576}}}
        assert json.loads(limited_body("generate_content", document, 2048)) == {
            "generationConfig": {
                "thinkingConfig": {"thinkingBudget": 2048},
                "maxOutputTokens": 2048,
            }
        }
        dynamic = {"generationConfig": {"thinkingConfig": {"thinkingBudget": -1}}}
        sent = json.loads(limited_body("generate_content", dynamic, 2048))
        assert sent["generationConfig"]["thinkingConfig"]["thinkingBudget"] == -1
