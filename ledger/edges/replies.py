"""``replies/`` in a home: what each served request that sealed something answered.

A client whose server was late or lost runs its request again in-process with
the same request id. When the chain shows that another run already sealed the
request, the retry seals nothing and prints that run's reply, read from here:
one small file per request id, written by whoever ran it before the chain lock
is let go (the server writes it inside its group commit).

The files are not fsync'd: a reply only has to outlive the process that
answered, not the machine. The client that waits for it runs on the same
machine (the socket is local), so a power loss ends the client too. They are
pruned after ``KEEP_SECONDS``, far longer than any client waits.
"""

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from ledger.edges.files import read_regular

REPLIES_DIR = "replies"
REPLY_FORMAT = "ledger-reply/1"
KEEP_SECONDS = 3600
_SUFFIX = ".json"
_WRITE_FIELDS = 2  # each write is [stream, text]


class Replies:
    """The replies kept in one home's ``replies/`` folder."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _file(self, request_id: str) -> Path:
        # Request ids match ^[A-Za-z0-9._:-]{1,128}$ (checked before a request
        # runs), so one is always a single file name; a leading dot is escaped
        # so that "." and ".." stay names of files.
        return self.path / f"r{request_id}{_SUFFIX}"

    def save(
        self, request_id: str, sealed: set[str], code: int, writes: list[tuple[int, str]]
    ) -> bool:
        """Keep the reply of ``request_id``; ``False`` when it could not be written.

        ``sealed`` names the entries the run sealed, so a reply is only ever
        given for the run that sealed what the chain holds.
        """
        body = {
            "format": REPLY_FORMAT,
            "request_id": request_id,
            "sealed": sorted(sealed),
            "code": code,
            "writes": [[stream, text] for stream, text in writes],
        }
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        target = self._file(request_id)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            self.path.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            temp.replace(target)
        except OSError:
            with contextlib.suppress(OSError):
                temp.unlink()
            return False
        return True

    def load(self, request_id: str, entry_hash: str) -> tuple[int, list[tuple[int, str]]] | None:
        """The exit code and writes of the run that sealed ``entry_hash``, if kept."""
        try:
            body = json.loads(read_regular(self._file(request_id), follow_symlinks=False))
        except (OSError, ValueError):
            return None
        if not _well_formed(body) or body["request_id"] != request_id:
            return None
        if entry_hash not in body["sealed"]:
            return None
        return body["code"], [(stream, text) for stream, text in body["writes"]]

    def prune(self) -> None:
        """Remove replies older than ``KEEP_SECONDS`` (measured against the newest one)."""
        try:
            found = [
                (entry.stat(follow_symlinks=False).st_mtime, Path(entry.path))
                for entry in os.scandir(self.path)
                if entry.name.endswith(_SUFFIX)
            ]
        except OSError:
            return
        if not found:
            return
        newest = max(mtime for mtime, _path in found)
        for mtime, path in found:
            if newest - mtime > KEEP_SECONDS:
                with contextlib.suppress(OSError):
                    path.unlink()


def _well_formed(body: Any) -> bool:
    if not isinstance(body, dict) or body.get("format") != REPLY_FORMAT:
        return False
    code, writes, sealed = body.get("code"), body.get("writes"), body.get("sealed")
    if isinstance(code, bool) or not isinstance(code, int) or not isinstance(sealed, list):
        return False
    return isinstance(writes, list) and all(
        isinstance(w, list) and len(w) == _WRITE_FIELDS and w[0] in (1, 2)
        and isinstance(w[1], str)
        for w in writes
    )  # fmt: skip
