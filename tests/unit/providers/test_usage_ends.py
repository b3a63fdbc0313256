"""What a reader tells the settlement rule: content began, something was unreadable."""

import json

from ledger.providers import Route, SSEDecoder, UsageReader, settle

MESSAGES = Route("anthropic", "messages")
CHAT = Route("openai", "chat_completions")


def _event(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


START = {"type": "message_start",
         "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 10, "output_tokens": 1}}}  # fmt: skip


def test_an_oversized_event_is_counted_as_dropped():
    decoder = SSEDecoder(max_event_bytes=64)
    assert decoder.feed(b"data: " + b"x" * 100 + b"\n\ndata: ok\n\n")[0].data == "ok"
    assert decoder.dropped == 1


def test_message_start_alone_is_no_content_and_an_error_then_settles_on_usage():
    reader = UsageReader.for_route(MESSAGES)
    reader.feed_sse(_event("message_start", START))
    assert not reader.content_began
    reader.feed_sse(_event("error", {"type": "error", "error": {"type": "overloaded_error"}}))
    assert settle(reader.end(200), 5_000).amount(123) == 123


def test_a_final_event_of_bad_json_makes_the_answer_unreadable():
    reader = UsageReader.for_route(MESSAGES)
    reader.feed_sse(_event("message_start", START))
    reader.feed_sse(b'event: message_delta\ndata: {"type": "message_delta", "usa\n\n')
    reader.feed_sse(_event("message_stop", {"type": "message_stop"}))
    assert reader.finished
    assert reader.unreadable
    assert settle(reader.end(200), 5_000).amount(123) == 5_000


def test_a_chat_stream_read_to_done_settles_on_its_usage():
    reader = UsageReader.for_route(CHAT)
    chunk = {"id": "c1", "model": "m", "choices": [{"delta": {"content": "hi"}}]}
    usage = {"id": "c1", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
    reader.feed_sse(f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\n".encode())
    reader.feed_sse(b"data: [DONE]\n\n")
    assert reader.content_began
    assert settle(reader.end(200), 5_000).amount(42) == 42
