"""The SSE decoder follows the WHATWG event-stream rules, whatever the chunk boundaries."""

from ledger.providers import ServerSentEvent, SSEDecoder


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


class TestDecoder:
    def test_named_event_with_multi_line_data(self):
        """``data`` lines join with LF; one space after the colon is dropped, no more."""
        stream = b"event: ping\ndata: a\ndata:  b\nid: 7\n\n"
        assert decode(stream) == [ServerSentEvent("ping", "a\n b", "7")]

    def test_unnamed_event_is_a_message(self):
        """An event without ``event:`` has type ``message``."""
        assert decode(b"data: [DONE]\n\n") == [ServerSentEvent("message", "[DONE]", "")]

    def test_every_line_ending(self):
        """CRLF, LF and CR each end a line."""
        stream = b"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\r\n\n"
        assert [event.data for event in decode(stream)] == ["a", "b", "c", "d"]

    def test_crlf_split_across_chunks_is_one_line_end(self):
        """A CR ending a chunk and the LF starting the next are one line ending, not two."""
        events = decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
        assert events == [ServerSentEvent("message", "a\nb", "")]

    def test_comments_and_unknown_fields_are_ignored(self):
        """``:`` lines are comments; unknown fields and ``retry`` change nothing."""
        stream = b": keep-alive\nfoo: bar\nretry: 10\ndata: x\n\n"
        assert decode(stream) == [ServerSentEvent("message", "x", "")]

    def test_event_without_data_is_not_dispatched(self):
        """A blank line with an empty data buffer dispatches nothing and resets the type."""
        assert decode(b"event: lonely\n\ndata: x\n\n") == [ServerSentEvent("message", "x", "")]

    def test_field_without_colon_is_a_field_with_empty_value(self):
        """``data`` alone appends an empty line."""
        assert decode(b"data\ndata: x\n\n") == [ServerSentEvent("message", "\nx", "")]

    def test_leading_byte_order_mark_is_dropped(self):
        """A BOM at the start of the stream is not part of the first field name."""
        assert decode(b"\xef\xbb\xbfdata: x\n\n") == [ServerSentEvent("message", "x", "")]

    def test_event_cut_before_its_blank_line_is_never_dispatched(self):
        """A stream that ends mid-event delivers nothing of it."""
        assert decode(b"data: whole\n\ndata: cut") == [ServerSentEvent("message", "whole", "")]
        assert decode(b"data: whole\n\ndata: cut\n") == [ServerSentEvent("message", "whole", "")]

    def test_id_with_nul_is_ignored(self):
        """An ``id`` containing NUL does not change the last event id."""
        assert decode(b"id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n")[1].id == "1"

    def test_utf8_split_inside_a_character(self):
        """A multi-byte character split across chunks decodes whole."""
        raw = "data: ✓é\n\n".encode()
        assert decode(raw[:7], raw[7:9], raw[9:]) == [ServerSentEvent("message", "✓é", "")]

    def test_empty_chunk_keeps_a_pending_cr(self):
        """An empty chunk between CR and LF does not turn them into two line endings."""
        assert decode(b"data: a\r", b"", b"\ndata: b\n\n")[0].data == "a\nb"


class TestLimits:
    def test_an_overlong_line_drops_its_event_only(self):
        """A line past the limit is dropped whole; the stream goes on."""
        decoder = SSEDecoder(max_event_bytes=16)
        chunks = [b"data: " + b"x" * 10, b"y" * 10 + b"\n\n", b"data: ok\n\n"]
        assert [event for chunk in chunks for event in decoder.feed(chunk)] == [
            ServerSentEvent("message", "ok", "")
        ]

    def test_an_event_of_many_lines_past_the_limit_is_dropped(self):
        """Many short data lines cannot add up past the limit either."""
        decoder = SSEDecoder(max_event_bytes=16)
        stream = b"data: 123456789\n" * 3 + b"\n" + b"data: ok\n\n"
        assert decoder.feed(stream) == [ServerSentEvent("message", "ok", "")]
