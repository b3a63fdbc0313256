"""The derived index: lookups at 10k and 1M entries, and the call path that writes it.

    python bench/bench_index.py lookups [--sizes 10000,1000000] [--dir DIR] [--reuse]
    python bench/bench_index.py callpath [--calls 300] [--resident] [--dir DIR]

``lookups`` fills ``state/index.sqlite3`` with N idempotency keys and N entry
refs (the rows as the product writes them: MAC'd and linked, bulk-loaded so
a million take seconds, not the hours of a million real calls), then times
2,000 lookups of each kind, median and p99 in microseconds: a key that is
there, a key that is not (its absence shown by its neighbour's link), and a
12-digit ref prefix. Goal: flat, the 1M figure within 1.2× of the 10k one.

``callpath`` seals CALLS verdict+record pairs with idempotency keys on a fresh
home, in this process, one-shot (a Runtime per call, as ``ledger verdict``
and ``ledger record`` run) or ``--resident`` (the batch runner the gateway
and ``ledger serve`` use), and prints the wall time per pair. It uses only
entry points every version has, so the same file times two checkouts
(``PYTHONPATH=… python bench/bench_index.py callpath``), pair by pair.

Homes live on the repository's disk (``bench/out``, or ``--dir``), not a tmpfs.
"""

import argparse
import functools
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
KEY = b"\x5e" * 32


def _bulk_load(path: Path, count: int) -> list[str]:
    """N keys and N refs, as linked MAC'd rows, written in one transaction; the hashes."""
    from ledger.edges.files import indexconn
    from ledger.edges.files.indexdb import IndexDb

    index = IndexDb(path, KEY)
    with index.writing() as tx:
        tx.set_meta(1, 1)
    keys = sorted(f"k:{n:09d}".encode() for n in range(count))
    hashes = sorted(hashlib.sha256(b"%d" % n).digest() for n in range(count))
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("BEGIN")
    rows = []
    for at, k in enumerate([b"", *keys]):
        following = keys[at] if at < len(keys) else None
        record = "" if not k else json.dumps({"key": k.decode(), "entry": at}, sort_keys=True)
        ts = "" if not k else "2026-11-22T00:00:00.000000Z"
        mac = index.mac("keys", k, following, ts, record)  # rows as the index writes them
        rows.append((k, following, ts, record, mac))
    db.execute("DELETE FROM keys")
    db.executemany("INSERT INTO keys (k, next, ts, record, mac) VALUES (?, ?, ?, ?, ?)", rows)
    rows = []
    for at, k in enumerate([b"", *hashes]):
        following = hashes[at] if at < len(hashes) else None
        values = (0, 0, None) if not k else (0, at, at * 700)
        mac = index.mac("refs", k, following, *values)  # rows as the index writes them
        rows.append((k, following, *values, mac))
    db.execute("DELETE FROM refs")
    db.executemany(
        "INSERT INTO refs (k, next, segment, entry, offset, mac) VALUES (?, ?, ?, ?, ?, ?)", rows
    )
    db.execute("COMMIT")
    db.close()
    indexconn.forget(os.fspath(path))
    return [digest.hex() for digest in hashes]


def _time(calls: list[Any]) -> tuple[float, float]:
    spent = []
    for call in calls:
        start = time.perf_counter()
        call()
        spent.append((time.perf_counter() - start) * 1e6)
    spent.sort()
    return statistics.median(spent), spent[int(len(spent) * 0.99)]


def lookups(sizes: list[int], directory: Path, *, reuse: bool = False) -> None:
    from ledger.edges.files.indexdb import IndexDb

    chooser = random.Random(7)
    figures: dict[int, dict[str, tuple[float, float]]] = {}
    for count in sizes:
        path = directory / f"index-{count}.sqlite3"
        started = time.perf_counter()
        if reuse and path.exists():
            hashes = sorted(hashlib.sha256(b"%d" % n).hexdigest() for n in range(count))
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            hashes = _bulk_load(path, count)
        built = time.perf_counter() - started
        index = IndexDb(path, KEY)
        index.find_key("k:000000000")  # open and warm the connection
        present = [f"k:{chooser.randrange(count):09d}" for _ in range(2000)]
        absent = [f"k:{chooser.randrange(count):09d}x" for _ in range(2000)]
        prefixes = [chooser.choice(hashes)[:12] for _ in range(2000)]
        find_key, find_refs = index.find_key, index.find_refs
        figures[count] = {
            "key present": _time([lambda k=k, f=find_key: f(k) for k in present]),
            "key absent": _time([lambda k=k, f=find_key: f(k) for k in absent]),
            "ref prefix": _time([lambda p=p, f=find_refs: f(p) for p in prefixes]),
        }
        size_mb = path.stat().st_size / 1e6
        print(f"{count:>9,} keys + refs: built in {built:.1f} s, {size_mb:.0f} MB", flush=True)
    first = sizes[0]
    print(f"\n{'lookup':<14}" + "".join(f"{f'{n:,} p50/p99 µs':>26}" for n in sizes) + "  ratio")
    for name in figures[first]:
        cells = "".join(f"{f'{figures[n][name][0]:.1f} / {figures[n][name][1]:.1f}':>26}"
                        for n in sizes)  # fmt: skip
        ratio = figures[sizes[-1]][name][0] / figures[first][name][0]
        print(f"{name:<14}{cells}  {ratio:.2f}x")


def callpath(calls: int, resident: bool, directory: Path) -> None:
    from ledger.cli import main
    from ledger.runtime import Runtime
    from ledger.services.gate import calls as gate

    home = Path(tempfile.mkdtemp(prefix="callpath-", dir=directory)) / "home"
    env = {"LEDGER_NOW": "2026-11-22T10:00:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}
    os.environ.update(env)
    try:
        try:
            main(["--home", str(home), "init", "--daily-cap-usd", "1000000"])
        except SystemExit as exit_:
            if exit_.code:
                raise
        env = {**os.environ, **env}

        def pair(runtime: Any, n: int) -> None:
            document, _ = gate.verdict(runtime, "0.01", "openai")
            gate.record(runtime, "0.01", "openai", verdict_ref=document["verdict_ref"],
                        idempotency_key_value=f"k-{n}")  # fmt: skip

        started = time.perf_counter()
        if resident:
            from ledger.batching import BatchRunner

            runner = BatchRunner(home, env, lambda _line: None)
            for n in range(calls):
                runner.run(functools.partial(pair, n=n), lambda: None)
            runner.close()
        else:
            for n in range(calls):
                pair(Runtime(home, env), n)
        spent = time.perf_counter() - started
        print(json.dumps({"pairs": calls, "resident": resident,
                          "ms_per_pair": round(spent / calls * 1000, 3)}))  # fmt: skip
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("what", choices=["lookups", "callpath"])
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--resident", action="store_true")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--reuse", action="store_true", help="keep indexes a run built")
    args = parser.parse_args()
    directory = Path(args.dir) if args.dir else REPO / "bench" / "out"
    directory.mkdir(parents=True, exist_ok=True)
    if args.what == "lookups":
        lookups([int(size) for size in args.sizes.split(",")], directory, reuse=args.reuse)
    else:
        callpath(args.calls, args.resident, directory)


if __name__ == "__main__":
    main()
