"""``replies.jsonl`` in a home: what each served request that sealed something answered.

A client whose server was late or lost runs its request again in-process with
the same request id. When the chain shows that another run already sealed the
request, the retry seals nothing and prints that run's reply, read from here.
Whoever runs a request that seals appends its reply, one line, before the
chain lock is let go (the server does so inside its group commit).

One append per reply, on a file that already exists: creating a file per
reply would cost the resident gate more than the rest of a verdict. A lookup
reads the file through; that happens only on a retry, which is rare. The file
is moved aside to ``replies.old.jsonl`` (replacing the one before) once it
passes ``ROTATE_BYTES``, so a lookup never reads more than twice that.

Nothing here is fsync'd: a reply only has to outlive the process that
answered, not the machine. The client that waits for it runs on the same
machine (the socket is local), so a power loss ends the client too.
"""

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from ledger.edges.fileio import read_regular

REPLIES_FILE = "replies.jsonl"
OLD_REPLIES_FILE = "replies.old.jsonl"
ROTATE_BYTES = 4 << 20
_WRITE_FIELDS = 2  # each write is [stream, text]


class Replies:
    """The replies kept in one home."""

    def __init__(self, home: Path) -> None:
        self.path = home / REPLIES_FILE
        self.old_path = home / OLD_REPLIES_FILE

    def save(
        self, request_id: str, sealed: set[str], code: int, writes: list[tuple[int, str]]
    ) -> bool:
        """Keep the reply of ``request_id``; ``False`` when it could not be written.

        ``sealed`` names the entries the run sealed, so a reply is only ever
        given for the run that sealed what the chain holds.
        """
        body = {
            "request_id": request_id,
            "sealed": sorted(sealed),
            "code": code,
            "writes": [[stream, text] for stream, text in writes],
        }
        line = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            return False
        try:
            # One write of the whole line: appends of concurrent writers never mix.
            # It starts with a newline, so a line cut short by a crash ends there
            # instead of swallowing this one.
            written = os.write(fd, b"\n" + line)
            size = os.fstat(fd).st_size
        except OSError:
            return False
        finally:
            os.close(fd)
        if size > ROTATE_BYTES:
            with contextlib.suppress(OSError):
                self.path.replace(self.old_path)
        return written == len(line) + 1

    def load(self, request_id: str, entry_hash: str) -> tuple[int, list[tuple[int, str]]] | None:
        """The exit code and writes of the run that sealed ``entry_hash``, if kept."""
        needle = json.dumps({"request_id": request_id}, separators=(",", ":"))[1:-1].encode()
        for path in (self.path, self.old_path):
            try:
                data = read_regular(path, follow_symlinks=False)
            except OSError:
                continue
            for raw in data.splitlines():
                if needle not in raw:
                    continue
                found = _reply_in(raw, request_id, entry_hash)
                if found is not None:
                    return found
        return None


def _reply_in(
    raw: bytes, request_id: str, entry_hash: str
) -> tuple[int, list[tuple[int, str]]] | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None  # a line cut short by a crash
    if not _well_formed(body) or body["request_id"] != request_id:
        return None
    if entry_hash not in body["sealed"]:
        return None
    return body["code"], [(stream, text) for stream, text in body["writes"]]


def _well_formed(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    code, writes, sealed = body.get("code"), body.get("writes"), body.get("sealed")
    if isinstance(code, bool) or not isinstance(code, int) or not isinstance(sealed, list):
        return False
    return isinstance(writes, list) and all(
        isinstance(w, list) and len(w) == _WRITE_FIELDS and w[0] in (1, 2)
        and isinstance(w[1], str)
        for w in writes
    )  # fmt: skip
