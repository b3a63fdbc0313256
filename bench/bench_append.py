"""Append rate with fsync: ``Writer``/``ChainFile`` against a bare flock+write+fsync loop.

Both loops run on the same disk in the same run. They alternate in small blocks
so that a change in the disk's load hits both alike; the rate of each is its
total appends over its total time. The goal is a ratio of at least 60 %.

    python bench/bench_append.py [--quick] [--count N] [--block N] [--dir DIR]
"""

import argparse
import fcntl
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from common import out_dir, payload, settle

from ledger.runtime import Runtime
from ledger.services.chain.home import init_home
from ledger.services.chain.writer import Writer


class BareLoop:
    """The minimum durable append: flock, write one line, fsync, unlock."""

    def __init__(self, directory: Path, line: bytes) -> None:
        self.line = line
        self.lock_fd = os.open(directory / "bare.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self.fd = os.open(directory / "bare.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def run(self, count: int) -> float:
        """Seconds for ``count`` appends."""
        began = time.perf_counter()
        for _ in range(count):
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX)
            os.write(self.fd, self.line)
            os.fsync(self.fd)
            fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
        return time.perf_counter() - began

    def close(self) -> None:
        """Release the descriptors."""
        os.close(self.fd)
        os.close(self.lock_fd)


class WriterLoop:
    """The product's path: lock, read the tail, seal (validate, sign), append, fsync."""

    def __init__(self, home: Path) -> None:
        self.writer = Writer(Runtime(home, environ={}))
        self.writer.signer()
        self.index = 0

    def run(self, count: int) -> float:
        """Seconds for ``count`` appends."""
        began = time.perf_counter()
        for _ in range(count):
            self.writer.append_one("budget.record_call", payload(self.index))
            self.index += 1
        return time.perf_counter() - began


def cpu_cost(count: int) -> float | None:
    """Microseconds per ``Writer`` append on tmpfs, where fsync costs nothing."""
    shm = Path("/dev/shm")  # noqa: S108 - a private mkdtemp inside it
    if not shm.is_dir():
        return None
    scratch = Path(tempfile.mkdtemp(dir=shm))
    try:
        home = scratch / "home"
        init_home(Runtime(home, environ={}), "100")
        loop = WriterLoop(home)
        loop.run(20)
        settle()
        return 1e6 * loop.run(count) / count
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    """Alternate both loops and print their rates and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a small run (200 appends each)")
    parser.add_argument("--count", type=int, default=None, help="appends per loop (2000)")
    parser.add_argument("--block", type=int, default=50, help="appends per alternation")
    parser.add_argument("--dir", default=None, help="scratch directory (default bench/out)")
    args = parser.parse_args()
    count = args.count or (200 if args.quick else 2000)
    blocks = max(1, count // args.block)
    scratch = out_dir(args.dir)
    try:
        home = scratch / "home"
        init_home(Runtime(home, environ={}), "100")
        writer = WriterLoop(home)
        writer.run(20)  # warm up: imports, key, caches, the chain file exists
        settle()
        line = (home / "events.jsonl").read_bytes().splitlines(keepends=True)[-1]
        bare = BareLoop(scratch, line)
        bare.run(20)
        bare_times, writer_times = [], []
        try:
            for _ in range(blocks):
                bare_times.append(bare.run(args.block))
                writer_times.append(writer.run(args.block))
        finally:
            bare.close()
        total = blocks * args.block
        bare_rate = total / sum(bare_times)
        writer_rate = total / sum(writer_times)
        per_block = [w / b for w, b in zip(writer_times, bare_times, strict=True)]
        ratio = writer_rate / bare_rate
        print(
            f"disk: {scratch}  ({total} appends each, alternating blocks of {args.block}; "
            f"line {len(line)} bytes; load average {os.getloadavg()[0]:.2f})"
        )
        print(
            f"bare flock+write+fsync : {bare_rate:8.0f} appends/s  ({1e6 / bare_rate:.0f} us each)"
        )
        print(
            f"Writer.append_one      : {writer_rate:8.0f} appends/s  "
            f"({1e6 / writer_rate:.0f} us each)"
        )
        print(
            f"ratio Writer/bare      : {100 * ratio:7.1f} %  (goal >= 60 %: "
            f"{'met' if ratio >= 0.6 else 'NOT met'}); median per block "
            f"{100 / statistics.median(per_block):.1f} %"
        )
        cpu = cpu_cost(max(50, total // 4))
        if cpu is not None:
            print(
                f"Writer on tmpfs        : {cpu:8.0f} us per append (its CPU cost; the bare "
                f"loop's {1e6 / bare_rate:.0f} us is the disk's)"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
