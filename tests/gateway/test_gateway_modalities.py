"""Audio, image and service tiers through `ledger proxy`, priced as genai-prices lists them.

The fake provider reports the usage a real one would (``x-test-usage``); each
call's record must be the library's own price for that usage, and its
estimate must price the most output the request may produce at the dearest
rate it may reach (audio or image output, the asked service tier). A usage
count the product does not know records the call at its estimate, with a
warning on the gateway's log, a metric, and the unknown part named.
"""

import json
import math
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from genai_prices import Usage

from tests.conftest import clean_env
from tests.gateway.helpers import Proxy, Upstream, records, start_proxy, verdicts, write_config
from tests.helpers.library_prices import PRICES_NOW, library_micros, library_rate

pytestmark = pytest.mark.timeout(180)
OPENAI = {"authorization": "Bearer sk-test"}
GOOGLE = {"x-goog-api-key": "AIzaSyTEST-not-a-real-key-0123456789"}


@pytest.fixture
def proxy(home: Path, upstream: Upstream, run_inproc: Any) -> Iterator[Proxy]:
    write_config(home, upstream.url, cap_usd="100")
    synced = run_inproc(["--home", str(home), "prices", "sync"], env={"LEDGER_NOW": PRICES_NOW})
    assert synced.code == 0, synced.stderr
    running = start_proxy(home, "--listen", "127.0.0.1:0", env=clean_env(LEDGER_NOW=PRICES_NOW))
    yield running
    assert running.stop() == 0, running.lines


def _post(proxy: Proxy, path: str, body: dict[str, Any], headers: dict[str, str],
          usage: dict[str, Any]) -> httpx.Response:  # fmt: skip
    response = httpx.post(
        f"{proxy.url}{path}", json=body, timeout=60,
        headers={**headers, "x-test-usage": json.dumps(usage)},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    return response


def _estimate(verdict: dict[str, Any], input_rate: Decimal, output_rate: Decimal) -> int:
    payload = verdict["payload"]
    exact: Decimal = payload["input_tokens"] * input_rate
    exact += payload["max_output_tokens"] * output_rate
    return math.ceil(exact)


def test_gpt_audio_is_priced_at_its_audio_rates_in_the_estimate_and_the_record(proxy, home):
    usage = {"prompt_tokens": 1200, "completion_tokens": 900, "total_tokens": 2100,
             "prompt_tokens_details": {"audio_tokens": 1000, "cached_tokens": 0},
             "completion_tokens_details": {"audio_tokens": 800, "reasoning_tokens": 0}}  # fmt: skip
    body = {"model": "gpt-audio", "max_completion_tokens": 2000,
            "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"},
            "messages": [{"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}]}  # fmt: skip
    _post(proxy, "/v1/chat/completions", body, OPENAI, usage)
    (record,) = records(home)
    listed = library_micros("openai", "gpt-audio", Usage(
        input_tokens=1200, input_audio_tokens=1000, output_tokens=900, output_audio_tokens=800))  # fmt: skip
    assert record["actual_micros"] == listed
    assert record["tokens"]["output_audio"] == 800
    assert record["rates"]["output_audio"] == "64"
    (verdict,) = verdicts(home)
    assert verdict["payload"]["estimated_micros"] == _estimate(
        verdict, library_rate("openai", "gpt-audio", "input_audio_mtok"),
        library_rate("openai", "gpt-audio", "output_audio_mtok"),
    )  # fmt: skip


def test_a_gemini_image_is_priced_at_its_image_output_rate(proxy, home):
    usage = {"promptTokenCount": 20, "candidatesTokenCount": 1300, "totalTokenCount": 1320,
             "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 1290},
                                         {"modality": "TEXT", "tokenCount": 10}]}  # fmt: skip
    body = {"contents": [{"role": "user", "parts": [{"text": "a cat"}]}],
            "generationConfig": {"maxOutputTokens": 1500,
                                 "responseModalities": ["TEXT", "IMAGE"]}}  # fmt: skip
    _post(proxy, "/v1beta/models/gemini-2.5-flash-image:generateContent", body, GOOGLE, usage)
    (record,) = records(home)
    listed = library_micros("google", "gemini-2.5-flash-image", Usage(
        input_tokens=20, output_tokens=1300, output_image_tokens=1290))  # fmt: skip
    assert record["actual_micros"] == listed
    (verdict,) = verdicts(home)
    assert verdict["payload"]["estimated_micros"] == _estimate(
        verdict, library_rate("google", "gemini-2.5-flash-image", "input_mtok"),
        library_rate("google", "gemini-2.5-flash-image", "output_image_mtok"),
    )  # fmt: skip


@pytest.mark.parametrize("tier", ["priority", "flex"])
def test_the_requests_service_tier_prices_the_estimate_and_the_record(proxy, home, tier):
    """The fake's answer names no tier: the request's prices the record too."""
    usage = {"input_tokens": 10_000, "output_tokens": 5_000, "total_tokens": 15_000,
             "input_tokens_details": {"cached_tokens": 2_000},
             "output_tokens_details": {"reasoning_tokens": 3_000}}  # fmt: skip
    body = {"model": "gpt-5", "input": "hi", "max_output_tokens": 8000, "service_tier": tier}
    _post(proxy, "/v1/responses", body, OPENAI, usage)
    (record,) = records(home)
    listed = library_micros(
        "openai", "gpt-5", Usage(input_tokens=10_000, cache_read_tokens=2_000,
                                 output_tokens=5_000), tier,
    )  # fmt: skip
    assert record["actual_micros"] == listed
    assert record["service_tier"] == tier
    (verdict,) = verdicts(home)
    assert verdict["payload"]["estimated_micros"] == _estimate(
        verdict, library_rate("openai", "gpt-5", "input_mtok", tier),
        library_rate("openai", "gpt-5", "output_mtok", tier),
    )  # fmt: skip


def test_a_usage_count_of_an_unknown_kind_records_the_estimate_with_a_warning(proxy, home):
    usage = {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
             "completion_tokens_details": {"hologram_tokens": 40}}  # fmt: skip
    body = {"model": "gpt-5", "max_completion_tokens": 4000,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    _post(proxy, "/v1/chat/completions", body, OPENAI, usage)
    (record,) = records(home)
    (verdict,) = verdicts(home)
    priced = library_micros("openai", "gpt-5", Usage(input_tokens=100, output_tokens=50))
    assert record["usage_micros"] == priced
    assert record["actual_micros"] == verdict["payload"]["estimated_micros"] > priced
    assert record["unknown_usage"] == ["completion_tokens_details.hologram_tokens"]
    assert proxy.wait_for("hologram_tokens")  # the gateway's log says what it did not price
