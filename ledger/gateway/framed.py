"""An admitted call whose stream is AWS event-stream frames (Bedrock), not SSE.

The frames pass on unchanged, whole frames at a time; the reader decodes a
copy of them (botocore's parser). The terminal frame (the one with the call's
usage, or an exception) and anything after it wait until the call is
recorded, as the terminal event of an SSE stream does.
"""

from ledger.gateway.exchange import Exchange


class FramedExchange(Exchange):
    """An ``Exchange`` whose stream is split at event-stream frame boundaries."""

    _carry = b""  # the bytes of a frame not yet whole
    _sent = 0  # the stream offset just past the last byte handed on or held

    def _split_at_terminal(self, chunk: bytes) -> tuple[bytes, bytes]:
        """Whole frames before the terminal one, and the terminal frame with all after it.

        A frame split across chunks goes on once it is whole; the bytes of a
        stream that is not event-stream framing go on as they come.
        """
        data = self._carry + chunk
        base = self._sent
        ends = self.reader.feed_frames(chunk)
        if self.reader.broken:
            self._carry = b""
            self._sent = base + len(data)
            return data, b""
        start = 0
        for end, ended in ends:
            if ended:
                self._carry = b""
                self._sent = base + len(data)
                return data[:start], data[start:]
            start = end - base
        self._carry = data[start:]
        self._sent = base + start
        return data[:start], b""
