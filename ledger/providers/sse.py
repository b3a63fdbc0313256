"""An incremental Server-Sent Events decoder: raw bytes in any chunking → events.

It follows the WHATWG HTML "event stream interpretation" rules: lines end at
CRLF, LF or CR (a CR at the end of a chunk may be the first half of a CRLF, so
it is held until the next byte is seen); a leading byte-order mark is dropped;
lines starting with ``:`` are comments; ``field: value`` loses one space after
the colon; ``data`` lines are joined with LF; a blank line dispatches the event
when its data buffer is not empty; an event the stream ends in the middle of is
never dispatched. Text is decoded as UTF-8 line by line (a line terminator is
never part of a multi-byte character), invalid bytes replaced.

The decoder holds at most one unfinished line and one unfinished event. A line
or an event larger than ``max_event_bytes`` is dropped whole (a provider's
events are a few kilobytes), so a hostile or broken stream cannot grow memory
without bound; ``dropped`` counts the events dropped so, so a reader knows
that something it could not read went by.
"""

from dataclasses import dataclass

_BOM = "\ufeff"
_CR, _LF = 0x0D, 0x0A


MAX_EVENT_BYTES = 16 * 1024 * 1024


class _Terminators:
    """The CR and LF positions of one chunk, each searched again only once passed."""

    def __init__(self, chunk: bytes) -> None:
        self._chunk = chunk
        self._cr = self._lf = -2  # not searched yet

    def next(self, start: int) -> int:
        """The index of the next CR or LF at or after ``start``, or -1."""
        if -1 != self._cr < start:
            self._cr = self._chunk.find(b"\r", start)
        if -1 != self._lf < start:
            self._lf = self._chunk.find(b"\n", start)
        if self._cr < 0 or (0 <= self._lf < self._cr):
            return self._lf
        return self._cr


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its type (``message`` unless named), data and last id."""

    event: str
    data: str
    id: str


class SSEDecoder:
    """Feed it bytes with ``feed``; it returns the events each chunk completed."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._partial = bytearray()  # the current line, not yet terminated
        self._overlong = False  # the current line passed the limit: dropped to its end
        self._event_bytes = 0
        self._dropping = False  # the event being read passed the limit: dropped at its end
        self._after_cr = False  # the previous chunk ended in CR: a following LF is its pair
        self._first_line = True
        self._event_type = ""
        self._data: list[str] = []
        self._last_id = ""
        self.dropped = 0

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk`` (bytes of the stream, split anywhere)."""
        events: list[ServerSentEvent] = []
        if not chunk:
            return events
        start = 0
        if self._after_cr and chunk[:1] == b"\n":
            start = 1  # the LF of a CRLF split across two chunks
        self._after_cr = False
        length = len(chunk)
        terminators = _Terminators(chunk)
        while start < length:
            end = terminators.next(start)
            if end < 0:
                break
            self._take(chunk, start, end)
            self._line_ended(events)
            start = end + 1
            if chunk[end] == _CR:
                if start == length:
                    self._after_cr = True
                elif chunk[start] == _LF:
                    start += 1
        self._take(chunk, start, length)
        return events

    def _take(self, chunk: bytes, start: int, end: int) -> None:
        if self._overlong:
            return
        if len(self._partial) + end - start > self._max:
            self._overlong = True
            self._partial.clear()
            return
        self._partial += chunk[start:end]

    def _line_ended(self, events: list[ServerSentEvent]) -> None:
        if self._overlong:
            self._overlong = False
            self._drop_event()
            return
        line = self._partial.decode("utf-8", errors="replace")
        self._partial.clear()
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._event_bytes += len(value)
            if self._event_bytes > self._max:
                self._drop_event()
            if not self._dropping:
                self._data.append(value)
        elif field == "event":
            self._event_type = value
        elif field == "id" and "\0" not in value:
            self._last_id = value
        # "retry" and unknown fields change nothing a reader of usage needs.

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if self._data:
            events.append(
                ServerSentEvent(self._event_type or "message", "\n".join(self._data), self._last_id)
            )
        self._data = []
        self._event_type = ""
        self._event_bytes = 0
        self._dropping = False

    def _drop_event(self) -> None:
        """Forget the event being read, up to its end: it is larger than the limit."""
        if not self._dropping:
            self.dropped += 1
        self._data = []
        self._dropping = True
