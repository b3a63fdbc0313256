"""For random requests, the estimate is never below what the provider bills for them.

Requests are drawn from the parts the SDKs' types allow (text, images of
several sizes, PDFs, tool definitions and calls, client tools, both Gemini
spellings); the bill is the fake provider's (``tests.fakes.billing``), which
follows each provider's documented rules at an honest worst case.
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.providers import Route, estimate_request
from tests.fakes import billing
from tests.helpers.documents import blank_pdf_base64, png_base64

IMAGES = [png_base64(*size) for size in ((1, 1), (300, 200), (1000, 1000), (2400, 900))]
PDFS = [blank_pdf_base64(pages) for pages in (1, 7)]
TEXT = st.text(max_size=200)
SCHEMA = st.dictionaries(st.text(max_size=10), st.sampled_from(["string", "integer"]), max_size=4)

CLAUDE_BLOCKS = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, TEXT),
    st.builds(lambda data: {"type": "image", "source": {"type": "base64",
              "media_type": "image/png", "data": data}}, st.sampled_from(IMAGES)),
    st.builds(lambda data: {"type": "document", "source": {"type": "base64",
              "media_type": "application/pdf", "data": data}}, st.sampled_from(PDFS)),
    st.builds(lambda name, args: {"type": "tool_use", "id": "t", "name": name, "input": args},
              TEXT, SCHEMA),
    st.builds(lambda text: {"type": "tool_result", "tool_use_id": "t",
              "content": [{"type": "text", "text": text}]}, TEXT),
)  # fmt: skip
CLAUDE_TOOLS = st.one_of(
    st.builds(lambda name, text, schema: {"name": name or "t", "description": text,
              "input_schema": {"type": "object", "properties": schema}}, TEXT, TEXT, SCHEMA),
    st.just({"type": "bash_20250124", "name": "bash"}),
    st.just({"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    system=st.one_of(st.none(), TEXT),
    messages=st.lists(st.lists(CLAUDE_BLOCKS, min_size=1, max_size=4), max_size=4),
    tools=st.lists(CLAUDE_TOOLS, max_size=3),
)
def test_an_anthropic_request_is_estimated_at_least_at_its_bill(system, messages, tools):
    request: dict[str, object] = {
        "model": "claude-sonnet-4-5", "max_tokens": 100,
        "messages": [{"role": "user", "content": blocks} for blocks in messages],
    }  # fmt: skip
    if system is not None:
        request["system"] = system
    if tools:
        request["tools"] = tools
    estimate = estimate_request(Route("anthropic", "messages"), json.dumps(request).encode())
    bill = billing.anthropic_usage(request)
    assert not estimate.unseen_input
    assert estimate.input_tokens >= bill["input_tokens"]
    assert estimate.max_output_tokens >= bill["output_tokens"]


GEMINI_PARTS = st.one_of(
    st.builds(lambda text: {"text": text}, TEXT),
    st.builds(lambda data, snake: {("inline_data" if snake else "inlineData"): {
              ("mime_type" if snake else "mimeType"): "image/png", "data": data}},
              st.sampled_from(IMAGES), st.booleans()),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    system=TEXT,
    contents=st.lists(st.lists(GEMINI_PARTS, min_size=1, max_size=4), max_size=4),
    snake=st.booleans(),
)
def test_a_gemini_request_in_either_spelling_is_estimated_at_least_at_its_bill(
    system, contents, snake
):
    request = {
        ("system_instruction" if snake else "systemInstruction"): {"parts": [{"text": system}]},
        "contents": [{"role": "user", "parts": parts} for parts in contents],
        ("generation_config" if snake else "generationConfig"): {
            ("max_output_tokens" if snake else "maxOutputTokens"): 100},
    }  # fmt: skip
    route = Route("google", "generate_content", model="gemini-2.5-flash")
    estimate = estimate_request(route, json.dumps(request).encode())
    bill = billing.gemini_usage(request)
    assert estimate.input_tokens >= bill["promptTokenCount"]
    assert estimate.max_output_tokens >= bill["candidatesTokenCount"]


OPENAI_PARTS = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, TEXT),
    st.builds(lambda data, detail: {"type": "image_url", "image_url": {
              "url": "data:image/png;base64," + data, **({"detail": detail} if detail else {})}},
              st.sampled_from(IMAGES), st.sampled_from([None, "low", "high", "auto"])),
)  # fmt: skip
OPENAI_TOOLS = st.builds(
    lambda name, text, schema: {"type": "function", "function": {"name": name or "f",
        "description": text, "parameters": {"type": "object", "properties": schema}}},
    TEXT, TEXT, SCHEMA,
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(["gpt-4o", "gpt-4.1", "gpt-4.1-mini"]),
    messages=st.lists(
        st.tuples(st.one_of(TEXT, st.lists(OPENAI_PARTS, min_size=1, max_size=4)),
                  st.one_of(st.none(), st.text(min_size=1, max_size=10))),
        max_size=4),
    tools=st.lists(OPENAI_TOOLS, max_size=3),
)  # fmt: skip
def test_an_openai_chat_request_is_estimated_at_least_at_its_bill(model, messages, tools):
    request: dict[str, object] = {
        "model": model, "max_completion_tokens": 100,
        "messages": [{"role": "user", "content": content, **({"name": name} if name else {})}
                     for content, name in messages],
    }  # fmt: skip
    if tools:
        request["tools"] = tools
    estimate = estimate_request(Route("openai", "chat_completions"), json.dumps(request).encode())
    bill = billing.openai_chat_usage(request)
    assert not estimate.unseen_input
    assert estimate.input_tokens >= bill["prompt_tokens"]
    assert estimate.max_output_tokens >= bill["completion_tokens"]
