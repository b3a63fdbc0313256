"""Findings one request shows: its status, its estimate, its stream, its record against the list.

They share one home per side (a $1,000 cap, the test models' prices and the
price snapshot of the installed genai-prices, so real model names are priced);
each case reads the verdicts and records its own request added.
"""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from findings_sides import Fake, usd, verdict_payloads, wait_records
from genai_prices import Usage

from tests.gateway.helpers import ANTHROPIC_HEADERS, OPENAI_HEADERS, micros
from tests.helpers.documents import png_base64
from tests.helpers.library_prices import library_micros

GOOGLE = {"x-goog-api-key": "AIza-bench"}
UNDER_LIST = "UNDER THE LIST PRICE"


@dataclass
class Place:
    """Where a case runs: one side's gateway, its home and the shared fake."""

    url: str
    home: Path
    fake: Fake
    side: str


@dataclass(frozen=True)
class Single:
    finding: str
    goal: str
    run: Callable[[Place], str]


def _post(place: Place, path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{place.url}{path}", content=content, headers=headers, timeout=120)


def estimate_of(path: str, body: Any, headers: dict[str, str]) -> Callable[[Place], str]:
    """A case whose figure is the estimate of one request (from its verdict entry)."""

    def run(place: Place) -> str:
        before = len(verdict_payloads(place.home))
        answer = _post(place, path, body, headers)
        verdicts = verdict_payloads(place.home)[before:]
        if not verdicts:
            return f"no verdict (HTTP {answer.status_code})"
        top = max(verdicts, key=lambda v: int(v.get("estimated_micros") or 0))
        tokens = f"{int(top.get('input_tokens') or 0):,} in"
        return f"{usd(int(top.get('estimated_micros') or 0))}, {tokens} (HTTP {answer.status_code})"

    return run


def surrogate(place: Place) -> str:
    raw = (b'{"model": "claude-test", "max_tokens": 10, '
           b'"messages": [{"role": "user", "content": "\\ud83d"}]}')  # fmt: skip
    return f"HTTP {_post(place, '/v1/messages', raw, ANTHROPIC_HEADERS).status_code}"


def json_array_stream(place: Place) -> str:
    """Gemini's JSON-array stream: the fake sends element 2 at +0.4 s and ']' at +0.8 s."""
    gate = f"array-{place.side}"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 1000}}  # fmt: skip
    url = f"{place.url}/v1beta/models/gemini-test:streamGenerateContent"

    def releases() -> None:
        for _ in range(2):
            time.sleep(0.4)
            place.fake.release(gate)

    releaser = threading.Thread(target=releases)
    began = time.perf_counter()
    releaser.start()
    headers = {**GOOGLE, "x-test-scenario": f"array:{gate}"}
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as response:
        chunks = response.iter_raw()
        next(chunks)
        first = time.perf_counter() - began
        for _ in chunks:
            pass
        whole = time.perf_counter() - began
    releaser.join()
    return f"first byte {first * 1000:.0f} ms of {whole * 1000:.0f} ms"


def chat_stream_usage(place: Place) -> str:
    """A chat stream without include_usage, 16k output allowed, 100 used: record vs usage."""
    before = len(wait_records(place.home, 0))
    body = {"model": "gpt-test", "max_completion_tokens": 16_000, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    usage = {"prompt_tokens": 9, "completion_tokens": 100, "total_tokens": 109}
    headers = {**OPENAI_HEADERS, "x-test-usage": json.dumps(usage)}
    with httpx.stream("POST", f"{place.url}/v1/chat/completions", json=body,
                      headers=headers, timeout=60) as response:  # fmt: skip
        response.read()
    records = wait_records(place.home, before + 1)[before:]
    recorded = sum(int(r.get("actual_micros") or 0) for r in records)
    real = micros("openai/gpt-test", 9, 100)
    return f"recorded {usd(recorded)} of real {usd(real)} ({recorded / real:.3g}x)"


def priced(
    path: str, body: dict[str, Any], headers: dict[str, str], usage: dict[str, Any],
    listed: Callable[[], int],
) -> Callable[[Place], str]:  # fmt: skip
    """A case whose figure is the record of a call the fake reports ``usage`` for."""

    def run(place: Place) -> str:
        before = len(wait_records(place.home, 0))
        answer = _post(place, path, body, {**headers, "x-test-usage": json.dumps(usage)})
        records = wait_records(place.home, before + 1)[before:]
        if answer.status_code != 200 or not records:
            return f"HTTP {answer.status_code}, {len(records)} records"
        recorded = int(records[0].get("actual_micros") or 0)
        price = listed()
        under = f" {UNDER_LIST}" if recorded < price else ""
        return f"recorded {usd(recorded)} vs list {usd(price)} ({recorded / price:.2f}x){under}"

    return run


AUDIO_OUT = {"prompt_tokens": 1200, "completion_tokens": 900, "total_tokens": 2100,
             "prompt_tokens_details": {"audio_tokens": 1000, "cached_tokens": 0},
             "completion_tokens_details": {"audio_tokens": 800, "reasoning_tokens": 0}}  # fmt: skip
AUDIO_IN = {"prompt_tokens": 20_000, "completion_tokens": 100, "total_tokens": 20_100,
            "prompt_tokens_details": {"audio_tokens": 19_000, "cached_tokens": 0}}  # fmt: skip
IMAGE_OUT = {"promptTokenCount": 20, "candidatesTokenCount": 1300, "totalTokenCount": 1320,
             "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 1290},
                                         {"modality": "TEXT", "tokenCount": 10}]}  # fmt: skip
TIERED = {"input_tokens": 10_000, "output_tokens": 5_000, "total_tokens": 15_000,
          "input_tokens_details": {"cached_tokens": 2_000}}  # fmt: skip


def _audio_body(max_tokens: int) -> dict[str, Any]:
    return {"model": "gpt-audio", "max_completion_tokens": max_tokens,
            "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"},
            "messages": [{"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}]}  # fmt: skip


def _claude(**extra: Any) -> dict[str, Any]:
    # A listed model: its own window (200k) is what context-1m widens.
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000,
            "messages": [{"role": "user", "content": "hi"}], **extra}  # fmt: skip


def singles() -> list[Single]:
    mcp = {"mcp_servers": [{"type": "url", "url": "https://mcp.example.com", "name": "m"}]}
    beta = {**ANTHROPIC_HEADERS, "anthropic-beta": "mcp-client-2025-04-04"}
    wide = {**ANTHROPIC_HEADERS, "anthropic-beta": "mcp-client-2025-04-04,context-1m-2025-08-07"}
    responses = {"model": "gpt-test", "max_output_tokens": 1000}
    gemini_tools = "/v1beta/models/gemini-test:generateContent"
    gemini = {
        "contents": [{"parts": [{"text": "hi"}]}],
        "generationConfig": {"maxOutputTokens": 1000},
    }
    image = {"model": "gpt-4.1-nano", "max_completion_tokens": 100, "messages": [{"role": "user",
             "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + png_base64(4096, 4096, mode="L")}}]}]}  # fmt: skip
    return [
        Single("A5 lone surrogate \\ud83d in a message", "an estimate (200) or 400", surrogate),
        Single(
            "A6 Gemini streamGenerateContent without alt=sse",
            "first byte ≪ whole",
            json_array_stream,
        ),
        Single(
            "A6 chat stream without include_usage (100 of 16k out)",
            "recorded = real (1x)",
            chat_stream_usage,
        ),
        Single(
            "A+ claude-sonnet-4-5 mcp_servers (estimate)",
            "≥ the 200k window",
            estimate_of("/v1/messages", _claude(**mcp), beta),
        ),
        Single(
            "A+ claude-sonnet-4-5 mcp_servers + context-1m (estimate)",
            "≥ the 1M window",
            estimate_of("/v1/messages", _claude(**mcp), wide),
        ),
        Single(
            "A+ Responses stored prompt (estimate)",
            "≥ the window",
            estimate_of("/v1/responses", {**responses, "prompt": {"id": "pmpt_1"}}, OPENAI_HEADERS),
        ),
        Single(
            "A+ Responses file_search (estimate)",
            "≥ the window + a call fee",
            estimate_of(
                "/v1/responses",
                {
                    **responses,
                    "input": "hi",
                    "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}],
                },
                OPENAI_HEADERS,
            ),
        ),
        Single(
            "A+ Responses image_generation (estimate)",
            "≥ the window",
            estimate_of(
                "/v1/responses",
                {**responses, "input": "hi", "tools": [{"type": "image_generation"}]},
                OPENAI_HEADERS,
            ),
        ),
        Single(
            "A+ Responses item_reference (estimate)",
            "≥ the window",
            estimate_of(
                "/v1/responses",
                {**responses, "input": [{"type": "item_reference", "id": "msg_1"}]},
                OPENAI_HEADERS,
            ),
        ),
        Single(
            "A+ Gemini urlContext (estimate)",
            "≥ the window",
            estimate_of(gemini_tools, {**gemini, "tools": [{"urlContext": {}}]}, GOOGLE),
        ),
        Single(
            "A+ Gemini googleSearch (estimate)",
            "≥ the window + grounding fee",
            estimate_of(gemini_tools, {**gemini, "tools": [{"googleSearch": {}}]}, GOOGLE),
        ),
        Single(
            "A+ gpt-4.1-nano 4096² image (estimate)",
            "≥ 3,779 input tokens",
            estimate_of("/v1/chat/completions", image, OPENAI_HEADERS),
        ),
        Single(
            "B gpt-audio, 800 audio tokens out",
            "recorded = list (1.00x)",
            priced(
                "/v1/chat/completions",
                _audio_body(2000),
                OPENAI_HEADERS,
                AUDIO_OUT,
                lambda: library_micros(
                    "openai",
                    "gpt-audio",
                    Usage(
                        input_tokens=1200,
                        input_audio_tokens=1000,
                        output_tokens=900,
                        output_audio_tokens=800,
                    ),
                ),
            ),
        ),
        Single(
            "B gpt-audio, 19k audio tokens in",
            "recorded = list (1.00x)",
            priced(
                "/v1/chat/completions",
                _audio_body(200),
                OPENAI_HEADERS,
                AUDIO_IN,
                lambda: library_micros(
                    "openai",
                    "gpt-audio",
                    Usage(input_tokens=20_000, input_audio_tokens=19_000, output_tokens=100),
                ),
            ),
        ),
        Single(
            "B gemini-2.5-flash-image, 1290 image tokens out",
            "recorded = list (1.00x)",
            priced(
                "/v1beta/models/gemini-2.5-flash-image:generateContent",
                {
                    **gemini,
                    "generationConfig": {
                        "maxOutputTokens": 1500,
                        "responseModalities": ["TEXT", "IMAGE"],
                    },
                },
                GOOGLE,
                IMAGE_OUT,
                lambda: library_micros(
                    "google",
                    "gemini-2.5-flash-image",
                    Usage(input_tokens=20, output_tokens=1300, output_image_tokens=1290),
                ),
            ),
        ),
        Single(
            "B gpt-5 service_tier priority",
            "recorded = list (1.00x)",
            priced(
                "/v1/responses",
                {
                    "model": "gpt-5",
                    "input": "hi",
                    "max_output_tokens": 8000,
                    "service_tier": "priority",
                },
                OPENAI_HEADERS,
                TIERED,
                lambda: library_micros(
                    "openai",
                    "gpt-5",
                    Usage(input_tokens=10_000, cache_read_tokens=2_000, output_tokens=5_000),
                    "priority",
                ),
            ),
        ),
    ]
