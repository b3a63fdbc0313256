"""Provider streams read the same however their bytes are split (SSE and usage)."""

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.providers.fixtures import fixture
from tests.unit.providers.test_sse import decode
from tests.unit.providers.test_usage import STREAMS, outcome, read_stream

LINE_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])
# A line ending then a blank line; a CR is never followed by an LF it is not paired with.
EVENT_ENDINGS = st.sampled_from([b"\n\n", b"\r\n\r\n", b"\r\r", b"\n\r\n", b"\r\n\n", b"\n\r"])
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=20)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, str]]]:
    """A stream of events with random line endings, and the events it holds."""
    events = draw(
        st.lists(st.tuples(st.sampled_from(["", "a", "message_delta"]), TEXT), max_size=6)
    )
    raw = b""
    for name, data in events:
        if name:
            raw += b"event: " + name.encode() + draw(LINE_ENDINGS)
        if draw(st.booleans()):
            raw += b": comment" + draw(LINE_ENDINGS)
        raw += b"data: " + data.encode() + draw(EVENT_ENDINGS)
    expected = [(name or "message", data) for name, data in events]
    return raw, expected


@given(streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_chunking_gives_the_same_events(stream, cuts):
    """Split anywhere (inside a CRLF, inside a character), the events are the same."""
    raw, expected = stream
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    chunks = [raw[start:end] for start, end in zip([0, *points], [*points, len(raw)], strict=True)]
    assert [(event.event, event.data) for event in decode(*chunks)] == expected


@given(
    st.sampled_from(sorted(STREAMS)),
    st.lists(st.integers(min_value=0, max_value=20_000), max_size=30),
)
def test_random_split_points_give_the_same_usage(name, cuts):
    """However the bytes arrive, the usage, ids, error and end are the same."""
    raw = fixture(name)
    route, *expected = STREAMS[name]
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    chunks = [raw[start:end] for start, end in zip([0, *points], [*points, len(raw)], strict=True)]
    assert outcome(read_stream(route, chunks)) == tuple(expected)
