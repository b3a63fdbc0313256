"""Golden cases of the allowlist estimate: PDFs by pages, images by size, tools, both spellings."""

import json

import pytest

from ledger.providers import RequestRefused, Route, anthropic, estimate_request, gemini, openai
from ledger.providers.limits import body_bytes, limited_body, read_output_limit
from tests.helpers.documents import blank_pdf_base64, png_base64

MESSAGES = Route("anthropic", "messages")
HI = {"type": "text", "text": "hi"}
CHAT = Route("openai", "chat_completions")
RESPONSES = Route("openai", "responses")


def generate(model: str = "gemini-2.5-flash") -> Route:
    return Route("google", "generate_content", model=model)


def claude(content: list[object], **extra: object) -> bytes:
    request = {"model": "claude-sonnet-4-5", "max_tokens": 10,
               "messages": [{"role": "user", "content": content}], **extra}  # fmt: skip
    return json.dumps(request).encode()


def gemini_body(parts: list[object], **extra: object) -> bytes:
    return json.dumps({"contents": [{"role": "user", "parts": parts}], **extra}).encode()


class TestPdfByPages:
    def test_a_hundred_page_pdf_counts_by_its_pages_everywhere(self):
        """16 KB of PDF, 100 pages: Claude bills ≥ 150,000 tokens; the estimate is above."""
        data = blank_pdf_base64(100)
        assert len(data) < 30_000
        document = {"type": "document", "source": {"type": "base64",
                    "media_type": "application/pdf", "data": data}}  # fmt: skip
        claude_tokens = estimate_request(MESSAGES, claude([document])).input_tokens
        assert claude_tokens >= 100 * anthropic.PDF_PAGE_TOKENS >= 150_000
        part = {"type": "file", "file": {"filename": "a.pdf",
                "file_data": f"data:application/pdf;base64,{data}"}}  # fmt: skip
        chat = json.dumps({"model": "gpt-4o", "max_tokens": 5,
                           "messages": [{"role": "user", "content": [part]}]}).encode()  # fmt: skip
        assert estimate_request(CHAT, chat).input_tokens >= 100 * openai.PDF_PAGE_TEXT_TOKENS
        inline = {"inlineData": {"mimeType": "application/pdf", "data": data}}
        request = gemini_body([inline], generationConfig={"maxOutputTokens": 5})
        found = estimate_request(generate(), request).input_tokens
        assert found >= 100 * gemini.PDF_PAGE_TOKENS

    def test_an_unreadable_pdf_counts_as_the_context_window(self):
        document = {"type": "document", "source": {"type": "base64",
                    "media_type": "application/pdf", "data": "JVBERi0xLjcK"}}  # fmt: skip
        estimate = estimate_request(MESSAGES, claude([document]))
        assert estimate.unseen_input
        assert estimate.window_reasons == ("unreadable PDF",)


class TestImagesBySize:
    @pytest.mark.parametrize(
        ("size", "expected"),
        [((1, 1), 1), ((200, 200), 54), ((1000, 1000), 1334), ((4000, 3000), 1600)],
    )
    def test_anthropic_bills_width_times_height_over_750_after_its_resize(self, size, expected):
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                 "data": png_base64(*size)}}  # fmt: skip
        text_only = estimate_request(MESSAGES, claude([])).input_tokens
        assert estimate_request(MESSAGES, claude([image])).input_tokens - text_only == expected

    @pytest.mark.parametrize(
        ("model", "size", "expected"),
        [
            ("gpt-4o", (1000, 1000), 85 + 170 * 4),
            ("gpt-4o", (4000, 1000), 85 + 170 * 4),  # 2048 × 512 after the resize
            ("gpt-4o-mini", (512, 512), 2833 + 5667),
            ("gpt-4.1-nano", (1000, 1000), 2520),  # 32 × 32 patches × 2.46
            ("gpt-4.1-mini", (4000, 4000), 2489),  # capped at 1,536 patches × 1.62
        ],
    )
    def test_openai_bills_tiles_or_patches_by_model_family(self, model, size, expected):
        assert openai.image_tokens(model, size) == expected

    def test_openai_an_unknown_model_is_billed_the_largest_rule(self):
        assert openai.image_tokens("my-model", (512, 512)) == 2833 + 5667

    @pytest.mark.parametrize(
        ("size", "expected"), [((300, 300), 258), ((1000, 1000), 4 * 258), ((3000, 768), 12 * 258)]
    )
    def test_gemini_bills_258_tokens_a_tile(self, size, expected):
        assert gemini.image_tokens("gemini-2.5-flash", size) == expected
        assert gemini.image_tokens("gemini-3-pro-preview", size) == max(expected, 1120)


class TestServerToolsAndReferences:
    @pytest.mark.parametrize(
        "tool",
        [{"type": "web_search_20250305", "name": "web_search"},
         {"type": "web_fetch_20250910", "name": "web_fetch"},
         {"type": "code_execution_20250825", "name": "code_execution"},
         {"type": "mcp_toolset", "mcp_server_name": "x"},
         {"type": "brand_new_tool_20990101", "name": "x"}],
    )  # fmt: skip
    def test_anthropic_server_tools_count_as_the_context_window(self, tool):
        estimate = estimate_request(MESSAGES, claude([HI], tools=[tool]))
        assert estimate.unseen_input

    def test_anthropic_client_tools_add_their_published_prompts(self):
        bash = estimate_request(
            MESSAGES, claude([], tools=[{"type": "bash_20250124", "name": "bash"}])
        )
        none = estimate_request(MESSAGES, claude([]))
        expected = anthropic.TOOL_USE_PROMPT_TOKENS + anthropic.TOOL_TOKENS + 245
        assert bash.input_tokens - none.input_tokens == expected
        assert not bash.unseen_input

    @pytest.mark.parametrize(
        "field",
        [{"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]},
         {"container": "container_1"}, {"speed": "fast"}, {"brand_new": 1}],
    )  # fmt: skip
    def test_anthropic_fields_that_bring_input_or_are_unknown_count_as_the_window(self, field):
        assert estimate_request(MESSAGES, claude([HI], **field)).unseen_input

    def test_the_context_1m_beta_sizes_the_window_at_a_million(self):
        headers = [("anthropic-beta", "interleaved-thinking-2025-05-14,context-1m-2025-08-07")]
        found = estimate_request(MESSAGES, claude([HI]), headers=headers)
        assert found.context_window == 1_000_000
        assert not found.unseen_input
        unknown = estimate_request(MESSAGES, claude([HI]), headers=[("anthropic-beta", "x-1")])
        assert unknown.unseen_input

    @pytest.mark.parametrize(
        "extra",
        [{"prompt": {"id": "pmpt_1"}}, {"tools": [{"type": "file_search"}]},
         {"tools": [{"type": "image_generation"}]}, {"input": [{"type": "item_reference", "id": "x"}]},
         {"conversation": "conv_1"}],
    )  # fmt: skip
    def test_openai_stored_input_and_server_tools_count_as_the_window(self, extra):
        request = {"model": "gpt-4o", "max_output_tokens": 5, "input": "hi", **extra}
        assert estimate_request(RESPONSES, json.dumps(request).encode()).unseen_input

    @pytest.mark.parametrize(
        "tool", [{"googleSearch": {}}, {"url_context": {}}, {"codeExecution": {}}, {"new_tool": {}}]
    )
    def test_gemini_server_tools_count_as_the_window(self, tool):
        request = gemini_body(
            [{"text": "hi"}], tools=[tool], generationConfig={"maxOutputTokens": 5}
        )
        assert estimate_request(generate(), request).unseen_input

    def test_gemini_grounding_is_priced_per_use(self):
        document: dict[str, object] = {"tools": [{"google_search": {}}, {"urlContext": {}}]}
        assert gemini.grounding_fee_micros(document, 5) == 5 * 35_000


class TestBothGeminiSpellings:
    def twins(self) -> tuple[bytes, bytes]:
        system = "S" * 10_000
        camel = {"systemInstruction": {"parts": [{"text": system}]},
                 "contents": [{"role": "user", "parts": [{"text": "hi"},
                     {"inlineData": {"mimeType": "image/png", "data": png_base64(1000, 1000)}}]}],
                 "cachedContent": "cachedContents/1",
                 "generationConfig": {"maxOutputTokens": 50, "candidateCount": 2,
                                      "thinkingConfig": {"thinkingBudget": 40}}}  # fmt: skip
        snake = {"system_instruction": {"parts": [{"text": system}]},
                 "contents": [{"role": "user", "parts": [{"text": "hi"},
                     {"inline_data": {"mime_type": "image/png", "data": png_base64(1000, 1000)}}]}],
                 "cached_content": "cachedContents/1",
                 "generation_config": {"max_output_tokens": 50, "candidate_count": 2,
                                       "thinking_config": {"thinking_budget": 40}}}  # fmt: skip
        return json.dumps(camel).encode(), json.dumps(snake).encode()

    def test_twins_estimate_alike(self):
        camel, snake = (estimate_request(generate(), twin) for twin in self.twins())
        assert camel.input_tokens == snake.input_tokens > 10_000 // 3
        assert camel.max_output_tokens == snake.max_output_tokens == 100
        assert camel.unseen_input  # cached content
        assert snake.unseen_input

    def test_a_limit_is_written_in_the_spelling_the_caller_used(self):
        _camel, snake = self.twins()
        document = json.loads(snake)
        sent = json.loads(limited_body("generate_content", document, 20))
        assert "generationConfig" not in sent
        assert sent["generation_config"]["max_output_tokens"] == 20
        assert sent["generation_config"]["thinking_config"]["thinking_budget"] == 20
        bare = {"system_instruction": {"parts": [{"text": "x"}]}, "contents": []}
        written = json.loads(limited_body("generate_content", bare, 7))
        assert written["generation_config"] == {"max_output_tokens": 7}
        assert read_output_limit("generate_content", written) == 7


class TestBadText:
    @pytest.mark.parametrize(
        "text", ['"\\ud83d"', '"a\\u0000b"', '"\\udc00\\ud83d"'], ids=["lone", "nul", "reversed"]
    )
    def test_text_utf8_cannot_carry_is_estimated_and_sent_as_its_escape(self, text):
        request = f'{{"model": "m", "max_tokens": 5, "messages": [{{"role": "user", "content": {text}}}]}}'
        estimate = estimate_request(MESSAGES, request.encode())
        assert estimate.input_tokens > 0
        sent = body_bytes(estimate.document)
        assert json.loads(sent) == estimate.document

    @pytest.mark.parametrize("raw", [b'{"model": "m", "x": "\\q"}', b'{"model": "\xed\xa0\xbd"}'])
    def test_invalid_escapes_and_bytes_are_refused(self, raw):
        with pytest.raises(RequestRefused):
            estimate_request(MESSAGES, raw)
