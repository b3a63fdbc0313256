"""A child process that appends to a home's chain (``python -m tests.helpers.append_worker``).

    append_worker batch HOME WORKER COUNT GO_FILE
        wait until GO_FILE exists, then append COUNT entries whose cycle_id is
        ``w<WORKER>-<i>``; print each acknowledged entry hash.
    append_worker loop HOME
        append until killed; print each entry hash once its append has returned.

Every printed hash is flushed right after ``Writer.append_one`` returns, so a
hash the parent has read names an entry that reached the disk.
"""

import sys
from pathlib import Path
from threading import Event

from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer


def _payload(worker: str, index: int) -> dict[str, object]:
    return {
        "provider": "openai",
        "actual_micros": index,
        "utc_day": "2026-11-22",
        "verdict_ref": None,
        "settled": False,
        "cycle_id": f"w{worker}-{index}",
    }


def main(argv: list[str]) -> int:
    """Run one mode; see the module docstring."""
    mode, home = argv[0], Path(argv[1])
    writer = Writer(Runtime(home))
    writer.signer()  # load the key before the race starts
    out = sys.stdout
    if mode == "batch":
        worker, count, go = argv[2], int(argv[3]), Path(argv[4])
        out.write("ready\n")
        out.flush()
        pause = Event()
        while not go.exists():
            pause.wait(0.001)
        for index in range(count):
            sealed = writer.append_one("budget.record_call", _payload(worker, index))
            out.write(sealed.entry_hash + "\n")
        out.flush()
        return 0
    if mode == "loop":
        index = 0
        while True:
            sealed = writer.append_one("budget.record_call", _payload("loop", index))
            out.write(sealed.entry_hash + "\n")
            out.flush()
            index += 1
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
