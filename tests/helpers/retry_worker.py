"""A client's in-process retry as its own process (``python -m tests.helpers.retry_worker``).

Reads one encoded request frame on stdin and answers it exactly as a client
whose server was late or lost does (``ledger.cli.client.answer_here`` with
``retry=True``): same request id, its own streams, its exit code.
"""

import sys

from ledger.cli.client import answer_here
from ledger.server.protocol import HEADER_SIZE, Request


def main() -> int:
    frame = sys.stdin.buffer.read()
    return answer_here(Request.decode(frame[HEADER_SIZE:]), retry=True)


if __name__ == "__main__":
    sys.exit(main())
