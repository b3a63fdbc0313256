"""A Bedrock event stream split anywhere passes on unchanged, its end held back, read the same."""

import itertools
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.gateway.framed import FramedExchange
from ledger.providers.bedrock import ConverseReader, InvokeStreamReader

FIXTURES = Path(__file__).parents[1] / "fixtures" / "providers"
INVOKE = (FIXTURES / "bedrock_invoke_stream.bin").read_bytes()
CONVERSE = (FIXTURES / "bedrock_converse_stream.bin").read_bytes()
ERROR = (FIXTURES / "bedrock_invoke_stream_error.bin").read_bytes()


def _relay(data: bytes, cuts: list[int], reader: Any) -> tuple[bytes, bytes]:
    """What the gateway hands on at once, and what it holds until the record (as its pump does)."""
    exchange = FramedExchange(None, "bedrock", "m", {}, None, reader, print)  # type: ignore[arg-type]
    passed, held = b"", b""
    bounds = [0, *sorted(cuts), len(data)]
    for start, end in itertools.pairwise(bounds):
        chunk = data[start:end]
        if held:
            reader.feed_sse(chunk)
            held += chunk
            continue
        ahead, terminal = exchange._split_at_terminal(chunk)
        passed += ahead
        held += terminal
    return passed, held


def _last_frame_start(data: bytes, reader: Any) -> int:
    ends: list[int] = [end for end, _ended in reader.feed_frames(data)]
    return ends[-2]


def _whole(data: bytes, kind: type) -> Any:
    reader = kind()
    reader.feed_frames(data)
    return reader


def test_every_single_byte_boundary() -> None:
    streams: list[tuple[bytes, type[Any]]] = [
        (INVOKE, InvokeStreamReader),
        (CONVERSE, ConverseReader),
        (ERROR, InvokeStreamReader),
    ]
    for data, kind in streams:
        whole = _whole(data, kind)
        terminal_at = _last_frame_start(data, kind())
        for cut in range(len(data) + 1):
            reader = kind()
            passed, held = _relay(data, [cut], reader)
            assert passed + held == data
            assert passed == data[:terminal_at]  # whole frames only, the last one held
            assert (reader.usage, reader.finished, reader.error) == (
                whole.usage, whole.finished, whole.error,
            )  # fmt: skip
            assert not reader.unreadable


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(INVOKE)), max_size=12))
def test_any_number_of_splits(cuts: list[int]) -> None:
    reader = InvokeStreamReader()
    passed, held = _relay(INVOKE, cuts, reader)
    assert passed + held == INVOKE
    assert reader.usage == _whole(INVOKE, InvokeStreamReader).usage
    assert reader.idempotency_key == "anthropic:msg_agent000001"
