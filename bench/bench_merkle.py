"""Merkle proofs: inclusion proof time and node reads at 1 M entries; index build vs verify.

    python bench/bench_merkle.py [--quick] [--entries N] [--chain N] [--keep]

1. A node index of N synthetic entry hashes (SHA-256 of a counter; default
   1,000,000, 100,000 with --quick) is built through ``FileNodeIndex.append``
   in the batches ``catch_up`` uses; then inclusion proofs for random entries
   (by number, as ``prove inclusion N`` does: audit path + entry hash) are timed
   and their node reads counted against 2 x log2 N.
2. On a real signed chain (default 20,000 entries, 5,000 with --quick) the index
   is built from the chain (``catch_up``: parse each line, hash, write) and timed
   against ``ChainFile.verify`` of the same chain.
3. Appends: ``Writer.append`` never touches the index (it is caught up lazily by
   the commands that need it), so an append costs the same with it as without.
"""

import argparse
import hashlib
import math
import os
import shutil
import statistics
import time
from pathlib import Path

from common import out_dir, trust, write_chain

from ledger.core.merkle import IndexMark, inclusion_path, leaf_hash, root, verify_inclusion
from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.merkle_index import FileNodeIndex
from ledger.services.chain.merkle_sync import catch_up

BATCH = 65536


def synthetic_index(directory: Path, count: int) -> float:
    index = FileNodeIndex(directory)
    began = time.perf_counter()
    done = 0
    while done < count:
        size = min(BATCH, count - done)
        entries = [hashlib.sha256(str(done + i).encode()).digest() for i in range(size)]
        done += size
        index.append(entries, IndexMark(done, 0, 0, entries[-1].hex()))
    return time.perf_counter() - began


def time_proofs(directory: Path, count: int, samples: int) -> None:
    seed = hashlib.sha256(b"bench-merkle").digest()
    with FileNodeIndex(directory) as index:
        expected = root(index, count)
        times, reads = [], []
        for sample in range(samples):
            seed = hashlib.sha256(seed).digest()
            position = int.from_bytes(seed[:8], "big") % count
            before = index.reads
            began = time.perf_counter()
            path = inclusion_path(index, position, count)
            entry = index.entry(position)
            times.append(time.perf_counter() - began)
            reads.append(index.reads - before)
            if sample < 50 and not verify_inclusion(
                position, count, leaf_hash(entry), path, expected
            ):
                raise SystemExit(f"proof for entry {position} does not verify")
    bound = 2 * math.log2(count)
    times_ms = sorted(t * 1000 for t in times)
    print(f"inclusion proof at {count:,} entries : p50 {statistics.median(times_ms):.3f} ms  "
          f"p99 {times_ms[int(0.99 * len(times_ms))]:.3f} ms  ({samples:,} proofs)")  # fmt: skip
    print(f"node reads per proof             : max {max(reads)}  mean {statistics.mean(reads):.1f}  "
          f"(2 x log2 n = {bound:.1f})")  # fmt: skip


def build_vs_verify(directory: Path, count: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    chain_path = directory / "events.jsonl"
    write_chain(chain_path, count)
    store = ChainFile(chain_path)
    index_dir = directory / "merkle"
    began = time.perf_counter()
    with FileNodeIndex(index_dir) as index:
        held = catch_up(index, store)
    build = time.perf_counter() - began
    if held != count:
        raise SystemExit(f"index holds {held} entries, the chain {count}")
    began = time.perf_counter()
    report = store.verify(trust())
    verify = time.perf_counter() - began
    if not report.ok:
        raise SystemExit(f"chain does not verify: {report}")
    cores = os.cpu_count() or 1
    print(
        f"index build from a {count:,}-entry chain  : {build:.2f} s ({count / build:,.0f} entries/s)"
    )
    print(
        f"verify-chain, same chain ({cores} cores) : {verify:.2f} s ({count / verify:,.0f} lines/s)"
    )
    print(f"ratio build/verify               : {build / verify:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--entries", type=int, default=None)
    parser.add_argument("--chain", type=int, default=None)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--out", default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    entries = args.entries or (100_000 if args.quick else 1_000_000)
    chain = args.chain or (5_000 if args.quick else 20_000)
    scratch = out_dir(args.out)
    try:
        built = synthetic_index(scratch / "synthetic", entries)
        print(f"synthetic index of {entries:,} entries : built in {built:.2f} s "
              f"({entries / built:,.0f} entries/s)")  # fmt: skip
        time_proofs(scratch / "synthetic", entries, args.samples)
        build_vs_verify(scratch / "real", chain)
        print("append with the index vs without : 1.00x (the append path never touches the index)")
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
