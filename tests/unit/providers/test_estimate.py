"""The estimate of a request: every text it sends ÷ 3, images, documents, its output limit."""

import json

import pytest

from ledger.providers import RequestRefused, Route, anthropic, estimate_request, openai
from tests.unit.providers.fixtures import fixture

MESSAGES = Route("anthropic", "messages")
CHAT = Route("openai", "chat_completions")
RESPONSES = Route("openai", "responses")


def utf8(*texts: str) -> int:
    return sum(len(text.encode("utf-8")) for text in texts)


def compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tokens(byte_count: int) -> int:
    return -(-byte_count // 3)


def body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def claude_frame(messages: int, tools: int = 0) -> int:
    """Anthropic's framing: per request, per message, its tool-use prompt and each tool's."""
    prompt = anthropic.TOOL_USE_PROMPT_TOKENS if tools else 0
    return (
        anthropic.REQUEST_TOKENS
        + messages * anthropic.MESSAGE_TOKENS
        + prompt
        + tools * anthropic.TOOL_TOKENS
    )


def openai_frame(messages: int, tools: int = 0) -> int:
    return openai.REQUEST_TOKENS + messages * openai.MESSAGE_TOKENS + tools * openai.TOOL_TOKENS


class TestAnthropicGolden:
    def test_every_kind_of_block_counts(self):
        """System, text, tool name + input, tool result, tool schema, a base64 PDF; +1600 per image."""
        schema = {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                }
            },
            "required": ["location"],
        }
        sent = utf8(
            "You are a careful assistant.",
            "What is the weather like in San Francisco? Ünïcödé ✓",
            "I'll check.",
            "get_weather",
            compact({"location": "San Francisco, CA"}),
            "15 degrees",
            "get_weather",
            "Get the current weather in a given location",
            compact(schema),
        )
        estimate = estimate_request(MESSAGES, fixture("anthropic_request.json"))
        assert estimate.provider == "anthropic"
        assert estimate.model == "claude-sonnet-4-5"
        # The image's data is no image: the most Claude bills for one.
        assert estimate.input_tokens == tokens(sent) + 1600 + claude_frame(3, tools=1)
        # The document's base64 is no readable PDF: it counts as the context window.
        assert estimate.unseen_input
        assert estimate.window_reasons == ("unreadable PDF",)
        assert estimate.max_output_tokens == 1024
        assert estimate.stream is True
        assert estimate.metadata_user_id == "session-42"

    def test_string_system_and_content(self):
        """A plain string system prompt and message content count as their UTF-8 bytes."""
        request = body(
            model="claude-sonnet-4-5", max_tokens=10, system="é" * 4,
            messages=[{"role": "user", "content": "abcd"}],
        )  # fmt: skip
        estimate = estimate_request(MESSAGES, request)
        assert estimate.input_tokens == tokens(8 + 4) + claude_frame(1)
        assert estimate.stream is False
        assert estimate.metadata_user_id is None

    def test_a_block_of_an_unknown_kind_counts_as_the_context_window(self):
        """Something new in the format counts as the most it could cost, never free."""
        block = {"type": "hologram", "data": "x"}
        request = body(model="m", max_tokens=1, messages=[{"role": "user", "content": [block]}])
        estimate = estimate_request(MESSAGES, request)
        assert estimate.unseen_input
        assert estimate.window_reasons == ("content block 'hologram'",)

    def test_text_and_nested_documents(self):
        """A plain-text document counts its text; a content document its blocks."""
        blocks = [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "abc"}},
            {"type": "document", "title": "T", "source": {"type": "content", "content": [
                {"type": "text", "text": "xyz"}, {"type": "image", "source": {}}]}},
        ]  # fmt: skip
        request = body(model="m", max_tokens=1, messages=[{"role": "user", "content": blocks}])
        assert estimate_request(MESSAGES, request).input_tokens == (
            tokens(7) + 1600 + claude_frame(1)
        )


class TestOpenAIGolden:
    def test_chat_completions(self):
        """Messages, tool calls, tools; an image adds 1600; a file its base64; output × n."""
        sent = utf8(
            "You are a careful assistant.",
            "What is in this image?",
            "get_weather",
            '{"location":"Boston"}',
            "15 degrees",
            "get_weather",
            "Get the weather",
            compact({"type": "object", "properties": {"location": {"type": "string"}}}),
        )
        estimate = estimate_request(CHAT, fixture("chat_request.json"))
        assert (estimate.provider, estimate.model) == ("openai", "gpt-4.1")
        assert estimate.input_tokens == tokens(sent) + openai_frame(4, tools=1)
        # The image is by URL and the file no readable PDF: the context window.
        assert estimate.window_reasons == ("image by reference", "unreadable file")
        assert estimate.max_output_tokens == 2 * 500  # n = 2 choices
        assert estimate.stream is True
        assert estimate.metadata_user_id is None

    def test_responses(self):
        """Instructions, input items, function calls and outputs, tools (built-in ones as JSON)."""
        sent = utf8(
            "You are a careful assistant.",
            "Describe this.",
            "get_weather",
            '{"location":"Paris"}',
            "15 degrees",
            "get_weather",
            "Get the weather",
            compact({"type": "object", "properties": {"location": {"type": "string"}}}),
        )
        estimate = estimate_request(RESPONSES, fixture("responses_request.json"))
        assert estimate.input_tokens == tokens(sent) + openai_frame(1, tools=2)
        reasons = ("image by reference", "unreadable file", "tool 'web_search'")
        assert estimate.window_reasons == reasons
        assert estimate.max_output_tokens == 256
        assert estimate.stream is False

    def test_responses_plain_string_input(self):
        """``input`` may be one string."""
        request = body(model="gpt-4.1", max_output_tokens=5, input="hello world!")
        assert estimate_request(RESPONSES, request).input_tokens == 4 + openai_frame(0)

    def test_chat_takes_the_larger_of_two_limits(self):
        """max_tokens (deprecated) and max_completion_tokens both bound the output."""
        request = body(model="gpt-4.1", max_tokens=900, max_completion_tokens=300, messages=[])
        assert estimate_request(CHAT, request).max_output_tokens == 900


class TestRefused:
    @pytest.mark.parametrize(
        ("route", "request_body", "words"),
        [
            (MESSAGES, b"not json", "not JSON"),
            (MESSAGES, b"\xff\xfe", "not JSON"),
            (MESSAGES, b"[1, 2]", "not a JSON object"),
            (MESSAGES, body(max_tokens=5, messages=[]), "no model"),
            (MESSAGES, body(model="", max_tokens=5), "no model"),
            (MESSAGES, body(model="m", messages=[]), "no output limit (max_tokens)"),
            (MESSAGES, body(model="m", max_tokens=0), "not a positive integer"),
            (MESSAGES, body(model="m", max_tokens=True), "not a positive integer"),
            (MESSAGES, body(model="m", max_tokens="5"), "not a positive integer"),
            (CHAT, body(model="m", messages=[]), "max_completion_tokens or max_tokens"),
            (RESPONSES, body(model="m", max_tokens=5, input="x"), "max_output_tokens"),
            (RESPONSES, b"[" * 100_000 + b"]" * 100_000, "not JSON"),
        ],
    )
    def test_request_that_cannot_be_bounded_is_refused(self, route, request_body, words):
        """No model, no output limit or no JSON object: refused before anything is sent."""
        with pytest.raises(RequestRefused) as caught:
            estimate_request(route, request_body)
        assert words in str(caught.value)
        assert caught.value.exit_code == 2

    def test_free_route_is_not_estimated(self):
        """count_tokens and the model list cost nothing: there is nothing to estimate."""
        with pytest.raises(RequestRefused):
            estimate_request(Route("anthropic", "free"), body(model="m", max_tokens=1))

    @staticmethod
    def nested(depth: int) -> bytes:
        content = '[{"type": "tool_result", "content": ' * depth + '"x"' + "}]" * depth
        request = '{"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": '
        return (request + content + "}]}").encode()

    def test_nested_tool_results_are_walked(self):
        """Tool results inside tool results count their text."""
        assert estimate_request(MESSAGES, self.nested(200)).input_tokens == 1 + claude_frame(1)

    def test_nesting_too_deep_is_refused_not_a_crash(self):
        """Nesting that exhausts the parser or the walk is a refusal, not a traceback."""
        with pytest.raises(RequestRefused, match=r"JSON|nests too deeply"):
            estimate_request(MESSAGES, self.nested(5000))


CODEX_SCHEMA = {"type": "object", "properties": {"command": {"type": "array"}}, "required": []}
CODEX_GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": "start: patch"}
CODEX_NAMESPACE = [{"type": "function", "name": "mcp_read", "parameters": {"type": "object"}}]


class TestCodexResponsesRequest:
    """The Responses API request Codex CLI sends: every part of it that reaches the model counts."""

    def request(self) -> dict[str, object]:
        return {
            "model": "gpt-5-codex",
            "instructions": "You are Codex, a coding agent.",
            "input": [
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "fix the tests"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look first."}],
                 "encrypted_content": "gAAAAB-opaque"},
                {"type": "function_call", "name": "shell", "call_id": "call_1",
                 "arguments": '{"command":["ls"]}'},
                {"type": "function_call_output", "call_id": "call_1", "output": "README.md"},
                {"type": "local_shell_call", "call_id": "call_2",
                 "action": {"type": "exec", "command": ["pytest"]}},
            ],
            "tools": [
                {"type": "function", "name": "shell", "description": "Run a command",
                 "strict": False, "parameters": CODEX_SCHEMA},
                {"type": "custom", "name": "apply_patch", "description": "Patch files",
                 "format": CODEX_GRAMMAR},
                {"type": "namespace", "name": "mcp", "tools": CODEX_NAMESPACE},
                {"type": "web_search"},
            ],
            "tool_choice": "auto", "parallel_tool_calls": False,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "4f1c2a8e",
        }  # fmt: skip

    def test_every_item_and_tool_counts(self):
        """Messages, reasoning, calls and outputs, unknown items whole; tools with all they carry."""
        request = self.request()
        sent = utf8(
            "You are Codex, a coding agent.",
            "fix the tests",
            "Look first.", "gAAAAB-opaque",
            "shell", '{"command":["ls"]}',
            "README.md",
            compact(request["input"][4]),  # type: ignore[index]
            "shell", "Run a command", compact(CODEX_SCHEMA),
            "apply_patch", "Patch files", compact(CODEX_GRAMMAR),
            "mcp", compact({"tools": CODEX_NAMESPACE}),
        )  # fmt: skip
        estimate = estimate_request(RESPONSES, json.dumps(request).encode(), default_output_limit=7)
        assert estimate.input_tokens == tokens(sent) + openai_frame(1, tools=4)
        assert estimate.window_reasons == ("tool 'web_search'",)
        assert estimate.max_output_tokens == 7
        assert estimate.stream is True
