"""The wire format between a per-call command and ``ledger serve`` (SPEC §9).

One request and one reply per connection, each one frame::

    frame = MAGIC (4 bytes) | body length (4 bytes, big-endian) | body
    body  = item*,  item = length (4 bytes, big-endian) | bytes

A request (magic ``LGQ2``) carries, in this order: the request id, the client's
working directory, whether stdin was read and its bytes, the encodings and error
handlers of the client's stdin, stdout and stderr, the client's terminal width
(0: none), the argument count and the arguments (everything after ``ledger``), the
variable count and the environment as one item of ``NAME=VALUE`` entries
separated by NUL bytes (no variable can hold one). Paths, arguments and
variables travel as the bytes the operating system gave the client, so nothing
is lost to a decoding.

A reply (magic ``LGA1``) carries a status (``ok``: answered; ``declined``: not
run, answer in-process; ``refused``: the peer's uid is not the server's), the
exit code, then what the command wrote, one item per write: ``1`` or ``2`` (the
stream) followed by the text in UTF-8 (lone surrogates kept). The client replays
the writes on its own streams, so buffering and interleaving are its own, as
if the command had run in it.

This module imports nothing: the client loads it before it knows whether the
server answers, and every millisecond there is paid by every hook.
"""

SOCKET_NAME = "gate.sock"
REQUEST_MAGIC = b"LGQ2"  # 2: the environment in one item
REPLY_MAGIC = b"LGA1"
HEADER_SIZE = 8
MAX_REQUEST = 16 << 20  # a PostToolUse hook's stdin may hold a whole file
MAX_REPLY = 4 << 20

STATUS_OK = b"ok"
STATUS_DECLINED = b"declined"
STATUS_REFUSED = b"refused"

_LENGTH = 4
_FIXED_FIELDS = 11


class ProtocolError(ValueError):
    """A frame that does not follow the format."""


def frame(magic: bytes, items: list[bytes]) -> bytes:
    """One frame holding ``items``."""
    parts = [magic, b""]
    for item in items:
        parts.append(len(item).to_bytes(_LENGTH, "big"))
        parts.append(item)
    body_length = sum(len(part) for part in parts[2:])
    parts[1] = body_length.to_bytes(_LENGTH, "big")
    return b"".join(parts)


def body_length(header: bytes, magic: bytes, limit: int) -> int:
    """The body length a frame header announces.

    Raises:
        ProtocolError: wrong magic, or a body longer than ``limit``.
    """
    if len(header) != HEADER_SIZE or header[:4] != magic:
        raise ProtocolError("not a ledger frame")
    length = int.from_bytes(header[4:], "big")
    if length > limit:
        raise ProtocolError(f"frame of {length} bytes exceeds {limit}")
    return length


def split_items(body: bytes) -> list[bytes]:
    """The items of a frame body.

    Raises:
        ProtocolError: an item runs past the end of the body.
    """
    items = []
    position = 0
    view = memoryview(body)
    while position < len(body):
        if position + _LENGTH > len(body):
            raise ProtocolError("truncated item length")
        size = int.from_bytes(view[position : position + _LENGTH], "big")
        position += _LENGTH
        if position + size > len(body):
            raise ProtocolError("truncated item")
        items.append(bytes(view[position : position + size]))
        position += size
    return items


class Request:
    """What shapes one per-call command: argv, stdin, environment, directory, streams."""

    __slots__ = (
        "argv",
        "columns",
        "cwd",
        "environ",
        "request_id",
        "stderr_codec",
        "stdin",
        "stdin_codec",
        "stdout_codec",
    )

    def __init__(
        self,
        request_id: str,
        cwd: bytes,
        argv: list[bytes],
        environ: list[bytes],
        *,
        stdin: bytes | None = None,
        stdin_codec: tuple[str, str] = ("utf-8", "strict"),
        stdout_codec: tuple[str, str] = ("utf-8", "strict"),
        stderr_codec: tuple[str, str] = ("utf-8", "backslashreplace"),
        columns: int = 0,
    ) -> None:
        self.request_id = request_id
        self.cwd = cwd
        self.argv = argv
        self.environ = environ
        self.stdin = stdin
        self.stdin_codec = stdin_codec
        self.stdout_codec = stdout_codec
        self.stderr_codec = stderr_codec
        self.columns = columns

    def encode(self) -> bytes:
        """The request as one frame."""
        items = [
            self.request_id.encode("ascii"),
            self.cwd,
            b"0" if self.stdin is None else b"1",
            self.stdin or b"",
            *(text.encode("ascii") for text in self.stdin_codec),
            *(text.encode("ascii") for text in self.stdout_codec),
            *(text.encode("ascii") for text in self.stderr_codec),
            str(self.columns).encode("ascii"),
            str(len(self.argv)).encode("ascii"),
            *self.argv,
            str(len(self.environ)).encode("ascii"),
            # One item: a variable cannot hold a NUL, and a hundred items cost
            # the server more to take apart than the rest of the request.
            b"\0".join(self.environ),
        ]
        return frame(REQUEST_MAGIC, items)

    @classmethod
    def decode(cls, body: bytes) -> "Request":
        """A request from a frame body.

        Raises:
            ProtocolError: the body is not a well-formed request.
        """
        items = split_items(body)
        try:
            request_id = items[0].decode("ascii")
            codecs = [item.decode("ascii") for item in items[4:10]]
            columns = int(items[10])
            argc = int(items[_FIXED_FIELDS])
            argv = items[_FIXED_FIELDS + 1 : _FIXED_FIELDS + 1 + argc]
            env_at = _FIXED_FIELDS + 1 + argc
            envc = int(items[env_at])
            if len(items) != env_at + 2:
                raise ProtocolError("item counts do not match")
            environ = items[env_at + 1].split(b"\0") if envc else []
            if argc < 0 or len(argv) != argc or len(environ) != envc:
                raise ProtocolError("item counts do not match")
            request = cls(
                request_id,
                items[1],
                argv,
                environ,
                stdin=items[3] if items[2] == b"1" else None,
                stdin_codec=(codecs[0], codecs[1]),
                stdout_codec=(codecs[2], codecs[3]),
                stderr_codec=(codecs[4], codecs[5]),
                columns=columns,
            )
        except (IndexError, ValueError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"malformed request: {exc}") from exc
        return request


class Reply:
    """The answer to one request: a status, an exit code and the writes, in order."""

    __slots__ = ("code", "status", "writes")

    def __init__(
        self, status: bytes, code: int = 0, writes: list[tuple[int, str]] | None = None
    ) -> None:
        self.status = status
        self.code = code
        self.writes = writes or []

    def encode(self) -> bytes:
        """The reply as one frame."""
        items = [self.status, str(self.code).encode("ascii")]
        items.extend(
            (b"1" if stream == 1 else b"2") + text.encode("utf-8", "surrogatepass")
            for stream, text in self.writes
        )
        return frame(REPLY_MAGIC, items)

    @classmethod
    def decode(cls, body: bytes) -> "Reply":
        """A reply from a frame body.

        Raises:
            ProtocolError: the body is not a well-formed reply.
        """
        items = split_items(body)
        try:
            status, code = items[0], int(items[1])
            writes = [
                (1 if item[:1] == b"1" else 2, item[1:].decode("utf-8", "surrogatepass"))
                for item in items[2:]
            ]
        except (IndexError, ValueError) as exc:
            raise ProtocolError(f"malformed reply: {exc}") from exc
        return cls(status, code, writes)
