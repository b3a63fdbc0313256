"""Input a request only points at is flagged, so it is never estimated as free."""

import json
from collections.abc import Mapping

import pytest

from ledger.providers import Route, estimate_request

MESSAGES = Route("anthropic", "messages")
CHAT = Route("openai", "chat_completions")
RESPONSES = Route("openai", "responses")


def _anthropic(block: Mapping[str, object]) -> bytes:
    content = [block, {"type": "text", "text": "summarise"}]
    return json.dumps({"model": "m", "max_tokens": 10,
                       "messages": [{"role": "user", "content": content}]}).encode()  # fmt: skip


def _chat(part: dict[str, object]) -> bytes:
    return json.dumps({"model": "m", "max_tokens": 10,
                       "messages": [{"role": "user", "content": [part]}]}).encode()  # fmt: skip


def _responses(**fields: object) -> bytes:
    return json.dumps({"model": "m", "max_output_tokens": 10, **fields}).encode()


def _part(part: dict[str, object]) -> list[dict[str, object]]:
    return [{"role": "user", "content": [part]}]


URL_PDF = {"type": "document", "source": {"type": "url", "url": "https://x.example/a.pdf"}}
FILE_PDF = {"type": "document", "source": {"type": "file", "file_id": "file_011"}}
URL_IMAGE = {"type": "image", "source": {"type": "url", "url": "https://x.example/a.png"}}
DATA_URL = "data:image/png;base64,AAAA"


@pytest.mark.parametrize(
    ("route", "request_body"),
    [
        (MESSAGES, _anthropic(URL_PDF)),
        (MESSAGES, _anthropic(FILE_PDF)),
        (MESSAGES, _anthropic(URL_IMAGE)),
        (CHAT, _chat({"type": "image_url", "image_url": {"url": "https://x.example/a.png"}})),
        (CHAT, _chat({"type": "file", "file": {"file_id": "file-abc"}})),
        (RESPONSES, _responses(input=_part({"type": "input_file", "file_id": "file-abc"}))),
        (RESPONSES, _responses(input=_part({"type": "input_file", "file_url": "https://x/a"}))),
        (RESPONSES, _responses(input=_part({"type": "input_image", "image_url": "https://x/a"}))),
        (RESPONSES, _responses(input=_part({"type": "input_image", "file_id": "file-abc"}))),
        (RESPONSES, _responses(input="more", conversation="conv_123")),
    ],
)
def test_input_given_by_reference_is_unseen(route, request_body):
    assert estimate_request(route, request_body).unseen_input


@pytest.mark.parametrize(
    ("route", "request_body"),
    [
        (MESSAGES, _anthropic({"type": "text", "text": "hi"})),
        (MESSAGES, _anthropic({"type": "image", "source": {"type": "base64", "data": "AAAA"}})),
        (CHAT, _chat({"type": "image_url", "image_url": {"url": DATA_URL}})),
        (RESPONSES, _responses(input=_part({"type": "input_image", "image_url": DATA_URL}))),
        (RESPONSES, _responses(input="hi")),
    ],
)
def test_input_in_the_body_is_not(route, request_body):
    assert not estimate_request(route, request_body).unseen_input


def test_previous_response_id_is_named_for_the_caller_to_size():
    found = estimate_request(RESPONSES, _responses(input="go on", previous_response_id="resp_1"))
    assert found.previous_response_id == "resp_1"
    assert not found.unseen_input
