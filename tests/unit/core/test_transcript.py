"""Claude Code transcript lines as calls, and the cursor kept per transcript."""

import json
import re
from pathlib import Path

import pytest

from ledger.core.prices import TokenCounts
from ledger.core.transcript import (
    Skipped,
    TranscriptCall,
    call_key,
    cursor_from,
    estimate_micros,
    fresh_cursor,
    fuller,
    read_line,
    still_owed,
    tokens_from_payload,
    top_up_key,
    usage_object,
)
from ledger.core.usage_objects import anthropic_tokens
from ledger.providers.anthropic import AnthropicUsageReader

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "claude_code" / "session_part1.jsonl"
KEY_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def line(**message):
    document = {
        "type": "assistant",
        "requestId": "req_1",
        "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 1, "output_tokens": 2}}
        | message,
    }
    return json.dumps(document).encode()


class TestReadLine:
    def test_the_fixture_reads_as_calls_and_non_calls(self):
        read = [read_line(raw) for raw in FIXTURE.read_bytes().splitlines()]
        found = [item for item in read if isinstance(item, TranscriptCall)]
        assert [c.message_id[:8] for c in found] == ["msg_01AA", "msg_01AA", "msg_01BB", "msg_01CC"]
        assert not any(isinstance(item, Skipped) for item in read)
        assert found[2].tokens == TokenCounts(3, 500, 1000, 12000, 95)
        assert found[0].identity == ("msg_01AAAAAAAAAAAAAAAAAAAAAA", "req_011AAAAAAAAAAAAAAAAAAAAA")

    def test_other_lines_and_synthetic_answers_are_not_calls(self):
        assert read_line(b'{"type":"user","message":{"role":"user","content":"hi"}}') is None
        assert read_line(b'{"type":"summary","summary":"x"}') is None
        assert read_line(line(model="<synthetic>")) is None

    @pytest.mark.parametrize(
        ("raw", "reason"),
        [
            (b"{not json", "not JSON"),
            (b"[1]", "not a JSON object"),
            (b'{"type":"assistant","message":"x"}', "assistant line without a message object"),
            (line(id=None), "assistant message without an id"),
            (line(model=7), "assistant message without a usable model"),
            (line(model="m" * 257), "assistant message without a usable model"),
            (line(usage=None), "assistant message without a usage object"),
            (line(usage={"input_tokens": 1}), "usage object lacks output_tokens"),
            (line(usage={"input_tokens": -1, "output_tokens": 1}), "usage input_tokens: negative"),
        ],
    )
    def test_unreadable_calls_are_skipped_with_a_reason(self, raw, reason):
        assert read_line(raw) == Skipped(reason)

    def test_a_missing_request_id_is_none(self):
        document = json.loads(line())
        del document["requestId"]
        call = read_line(json.dumps(document).encode())
        assert isinstance(call, TranscriptCall)
        assert call.identity == ("msg_1", None)


class TestCallKey:
    def test_a_message_id_is_the_key_the_gateway_and_the_sdk_guard_give_it(self):
        assert call_key("msg_01ABC") == "anthropic:msg_01ABC"
        reader = AnthropicUsageReader()
        reader.feed_json(b'{"id": "msg_01ABC", "usage": {"input_tokens": 1, "output_tokens": 1}}')
        assert reader.idempotency_key == call_key("msg_01ABC")

    @pytest.mark.parametrize("message_id", ["has space", "x" * 101, "é", "a/b"])
    def test_ids_the_key_alphabet_cannot_hold_are_hashed(self, message_id):
        key = call_key(message_id)
        assert key.startswith("cc:sha256:")
        assert KEY_RE.fullmatch(key)
        assert call_key(message_id) == key


def test_the_fuller_line_of_a_call_wins():
    small = read_line(line(usage={"input_tokens": 5, "output_tokens": 2}))
    big = read_line(line(usage={"input_tokens": 5, "output_tokens": 90}))
    assert isinstance(small, TranscriptCall)
    assert isinstance(big, TranscriptCall)
    assert fuller(small, big) is big
    assert fuller(big, small) is big
    same = read_line(line(usage={"input_tokens": 5, "output_tokens": 90}))
    assert isinstance(same, TranscriptCall)
    assert fuller(big, same) is same  # a tie: the later line


class TestCursor:
    def test_garbage_starts_afresh(self):
        samples: list[object] = [None, [], {"format": 2, "offset": 9}, "x"]
        for raw in samples:
            assert cursor_from(raw) == {**fresh_cursor(), "pending": [],
                                        "gating_off_noted": False}  # fmt: skip

    def test_a_bad_figure_restarts_the_read_but_keeps_the_refs(self):
        ref = "a" * 64
        raw = {"format": 1, "offset": -3, "tail": None, "calls": 2, "micros": 9,
               "pending": [ref, "short", 7], "gating_off_noted": True}  # fmt: skip
        cursor = cursor_from(raw)
        assert (cursor["offset"], cursor["calls"], cursor["micros"]) == (0, 0, 0)
        assert cursor["pending"] == [ref]
        assert cursor["gating_off_noted"] is True

    def test_a_good_cursor_is_kept(self):
        raw = {"format": 1, "offset": 120, "tail": {"start": 40, "sha256": "00"},
               "calls": 2, "micros": 9, "pending": [], "gating_off_noted": False,
               "partial": {"start": 120, "scanned": 9000}}  # fmt: skip
        assert cursor_from(raw) == raw
        assert cursor_from({**raw, "partial": {"start": -1}})["partial"] is None


@pytest.mark.parametrize(
    ("calls", "micros", "estimate"),
    [(0, 0, 10_000), (3, 9_000, 10_000), (3, 37_121, 12_374), (1, 250_000, 250_000)],
)
def test_the_estimate_is_the_mean_rounded_up_at_least_a_cent(calls, micros, estimate):
    cursor = {**fresh_cursor(), "calls": calls, "micros": micros}
    assert estimate_micros(cursor) == estimate


class TestTopUps:
    def test_the_key_numbers_the_top_up_and_stays_within_the_key_alphabet(self):
        assert top_up_key("msg_01A", 2) == "anthropic:msg_01A:2"
        long_id = "m" * 125
        key = top_up_key(long_id, 12)
        assert len(key) <= 128
        assert key.endswith(":12")
        assert key.startswith("cc:sha256:")

    def test_only_what_grew_is_owed(self):
        recorded = TokenCounts(input=4, cache_read=100, output=10)
        full = TokenCounts(input=4, cache_read=100, output=110)
        assert still_owed(full, recorded) == TokenCounts(output=100)
        assert still_owed(recorded, recorded) is None
        # A kind that shrank stays as recorded: never counted twice.
        assert still_owed(TokenCounts(input=4, output=5), recorded) is None

    def test_the_usage_object_of_a_top_up_reads_back_as_its_tokens(self):
        owed = TokenCounts(input=1, cache_write_5m=2, cache_write_1h=3, cache_read=4, output=5)
        assert anthropic_tokens(usage_object(owed)) == owed
        assert tokens_from_payload(owed.as_payload()) == owed
        assert tokens_from_payload(None) is None
