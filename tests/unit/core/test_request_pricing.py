"""What a request asks for that changes its price: service tier, audio/image out, audio in."""

import pytest

from ledger.core.request_pricing import RequestPricing, request_pricing

AUDIO_PART = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}


@pytest.mark.parametrize(
    ("provider", "document", "expected"),
    [
        ("openai", {"messages": [{"role": "user", "content": "hi"}]}, RequestPricing()),
        ("openai", {"messages": [], "modalities": ["text", "audio"]},
         RequestPricing(output_modalities=frozenset({"audio"}))),
        ("openai", {"messages": [], "audio": {"voice": "alloy"}},
         RequestPricing(output_modalities=frozenset({"audio"}))),
        ("openai", {"messages": [{"role": "user", "content": [AUDIO_PART]}]},
         RequestPricing(input_modalities=frozenset({"audio"}))),
        ("openai", {"input": "hi", "service_tier": "priority"},
         RequestPricing(service_tier="priority")),
        ("deepseek", {"messages": [], "service_tier": "flex"}, RequestPricing(service_tier="flex")),
        ("anthropic", {"messages": [], "service_tier": "auto"}, RequestPricing(service_tier="auto")),
        ("google", {"contents": [], "generationConfig": {"responseModalities": ["TEXT", "IMAGE"]}},
         RequestPricing(output_modalities=frozenset({"image"}))),
        ("google", {"contents": [], "generation_config": {"response_modalities": ["AUDIO"]}},
         RequestPricing(output_modalities=frozenset({"audio"}))),
        ("google", {"contents": [], "generationConfig": {"speechConfig": {}}},
         RequestPricing(output_modalities=frozenset({"audio"}))),
        ("google", {"contents": [{"parts": [
            {"inlineData": {"mimeType": "audio/wav", "data": "AA=="}},
            {"file_data": {"mime_type": "video/mp4", "file_uri": "gs://x"}}]}]},
         RequestPricing(input_modalities=frozenset({"audio", "video"}))),
    ],
)  # fmt: skip
def test_each_request_field_is_read(provider, document, expected):
    assert request_pricing(provider, document) == expected


def test_a_deeply_nested_request_is_read_without_failing():
    nested: dict[str, object] = {"type": "input_audio"}
    for _ in range(500):
        nested = {"content": [nested]}
    assert request_pricing("openai", {"messages": [nested]}).input_modalities == frozenset()
