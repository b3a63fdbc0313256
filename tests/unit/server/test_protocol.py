"""The wire format between the front door and `ledger serve` (ledger.server.protocol)."""

import pytest

from ledger.server.protocol import (
    HEADER_SIZE,
    REPLY_MAGIC,
    REQUEST_MAGIC,
    STATUS_OK,
    ProtocolError,
    Reply,
    Request,
    body_length,
    split_items,
)


class TestRequest:
    def test_a_request_survives_the_wire_byte_for_byte(self):
        """Arguments, variables and paths that are not UTF-8, binary stdin, codecs, width."""
        request = Request(
            "rq-00ff",
            b"/tmp/caf\xe9",
            [b"--home", b"h\xff", b"verdict", b"", b"1"],
            [b"LEDGER_NOW=2026-06-01T12:00:00Z", b"ODD=\xfe=x", b"EMPTY="],
            stdin=b"\x00\x01 binary \xff",
            stdin_codec=("latin-1", "surrogateescape"),
            stdout_codec=("ascii", "strict"),
            stderr_codec=("utf-8", "backslashreplace"),
            columns=132,
        )
        frame = request.encode()
        assert frame[:4] == REQUEST_MAGIC
        back = Request.decode(frame[HEADER_SIZE:])
        for name in Request.__slots__:
            assert getattr(back, name) == getattr(request, name), name

    def test_one_variable_and_an_empty_value_come_back(self):
        """The environment travels as one NUL-separated item: edge counts survive it."""
        for environ in ([b"ONLY=1"], [b"EMPTY="], [b"A=1", b"B="]):
            frame = Request("rq-1", b".", [b"usage"], environ).encode()
            assert Request.decode(frame[HEADER_SIZE:]).environ == environ

    def test_a_variable_holding_a_nul_is_not_a_request(self):
        """No exec'd process has one; a frame whose counts then disagree is refused."""
        frame = Request("rq-1", b".", [b"usage"], [b"A=1\x00B=2"]).encode()
        with pytest.raises(ProtocolError, match="counts"):
            Request.decode(frame[HEADER_SIZE:])

    def test_no_stdin_is_not_an_empty_stdin(self):
        """A command that reads no stdin is told so (None), not given an empty one."""
        frame = Request("rq-1", b".", [b"usage"], []).encode()
        assert Request.decode(frame[HEADER_SIZE:]).stdin is None
        frame = Request("rq-1", b".", [b"hook"], [], stdin=b"").encode()
        assert Request.decode(frame[HEADER_SIZE:]).stdin == b""

    @pytest.mark.parametrize(
        "body",
        [b"", b"\x00\x00\x00\x05abc", b"\x00\x00\x00\x01x" * 3, b"\x00\x00\x00\x01x" * 20],
        ids=["empty", "truncated item", "too few items", "numbers that are not"],
    )
    def test_a_malformed_request_is_a_protocol_error(self, body):
        """Never an IndexError or a half-built request."""
        with pytest.raises(ProtocolError):
            Request.decode(body)


class TestReply:
    def test_writes_keep_their_order_streams_and_lone_surrogates(self):
        """The client replays exactly what the command wrote, in order."""
        reply = Reply(STATUS_OK, 78, [(2, "ledger: x\n"), (1, '{"a": "\udcff \u2603"}\n'), (2, "")])
        frame = reply.encode()
        assert frame[:4] == REPLY_MAGIC
        back = Reply.decode(frame[HEADER_SIZE:])
        assert (back.status, back.code, back.writes) == (reply.status, reply.code, reply.writes)


class TestFrames:
    def test_a_frame_header_names_its_length_and_is_bounded(self):
        """Wrong magic or an oversized body is refused before anything is read."""
        frame = Request("rq-1", b".", [], []).encode()
        assert body_length(frame[:HEADER_SIZE], REQUEST_MAGIC, 1 << 20) == len(frame) - HEADER_SIZE
        with pytest.raises(ProtocolError, match="not a ledger frame"):
            body_length(frame[:HEADER_SIZE], REPLY_MAGIC, 1 << 20)
        with pytest.raises(ProtocolError, match="exceeds"):
            body_length(REQUEST_MAGIC + (1 << 30).to_bytes(4, "big"), REQUEST_MAGIC, 1 << 20)

    def test_items_are_split_exactly(self):
        """Empty items and binary items come back as they went."""
        body = Request("rq-1", b"", [b"", b"\x00"], []).encode()[HEADER_SIZE:]
        assert split_items(body)[:2] == [b"rq-1", b""]
