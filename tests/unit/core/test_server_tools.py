"""Server-side web search fees: counted from usage, bounded in requests."""

import datetime as dt
import json
from fractions import Fraction

from ledger.core.price_table import parse_provider_file
from ledger.core.server_tools import search_fee_micros, web_searches
from ledger.edges.pricebook import build_snapshot
from ledger.providers import Route, bound_web_searches

MESSAGES = Route("anthropic", "messages")
RESPONSES = Route("openai", "responses")
CHAT = Route("openai", "chat_completions")


def test_searches_from_usage():
    assert web_searches("anthropic", {"server_tool_use": {"web_search_requests": 7}}) == 7
    assert web_searches("anthropic", {"input_tokens": 1}) == 0
    assert web_searches("openai", {"web_search_calls": 2}) == 2
    assert web_searches("openai", {"web_search_calls": True}) == 0


def test_the_fee_is_ten_dollars_per_thousand_unless_the_model_says_otherwise():
    assert search_fee_micros(200, None) == 2_000_000
    assert search_fee_micros(1, Fraction(25)) == 25_000


def test_genai_prices_search_fees_are_in_the_snapshot():
    files = build_snapshot(dt.datetime(2026, 6, 1, tzinfo=dt.UTC))
    models = parse_provider_file(files["anthropic.json"], "anthropic").models
    assert any(model.get("web_search_per_1000") == "10" for model in models)


def _body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_bounds_are_written_only_where_missing():
    tools = [{"type": "web_search_20250305", "name": "a"},
             {"type": "web_search_20250305", "name": "b", "max_uses": 2},
             {"name": "calc", "input_schema": {}}]  # fmt: skip
    body, searches = bound_web_searches(MESSAGES, _body(tools=tools), 5)
    assert searches == 7
    assert [tool.get("max_uses") for tool in json.loads(body)["tools"]] == [5, 2, None]
    same = _body(tools=[{"type": "web_search_20250305", "name": "a", "max_uses": 1}])
    assert bound_web_searches(MESSAGES, same, 5) == (same, 1)


def test_openai_bounds():
    body, searches = bound_web_searches(RESPONSES, _body(tools=[{"type": "web_search"}]), 4)
    assert (json.loads(body)["max_tool_calls"], searches) == (4, 4)
    plain = _body(input="hi")
    assert bound_web_searches(RESPONSES, plain, 4) == (plain, 0)
    chat = _body(web_search_options={})
    assert bound_web_searches(CHAT, chat, 4) == (chat, 1)
