"""Shared pieces of the benchmarks: a deterministic key, payloads, fast chain files, the
bare flock + write + fsync loop that appends are measured against."""

import datetime as dt
import fcntl
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.envelope import GENESIS, render_line
from ledger.core.signing import Signer
from ledger.core.timefmt import format_ts
from ledger.core.trust import TrustedKey, TrustStore
from ledger.edges.fileio import SETTLED_NS

REPO = Path(__file__).resolve().parent.parent
SEED = bytes.fromhex("5e" * 32)
START = dt.datetime(2026, 11, 22, 0, 0, tzinfo=dt.UTC)


def settle() -> None:
    """Wait until a home's files count as settled, as in a home in service.

    A process remembers the trust store, keys, ``ledger.toml`` and the state's
    MAC key by file identity only once they have gone unchanged for
    ``SETTLED_NS`` (``ledger.edges.fileio``); before that every decision reads
    them again.
    """
    time.sleep(SETTLED_NS / 1e9 + 0.1)


def signer() -> Signer:
    """The benchmarks' writer key (fixed seed)."""
    return Signer.from_private_key(Ed25519PrivateKey.from_private_bytes(SEED))


def trust() -> TrustStore:
    """A trust store holding the benchmarks' key."""
    key = signer()
    return TrustStore((TrustedKey(key.key_id, key.public_raw),))


def payload(index: int) -> dict[str, Any]:
    """A ``budget.record_call`` payload."""
    return {
        "provider": "openai",
        "actual_micros": 1000 + index,
        "utc_day": "2026-11-22",
        "verdict_ref": None,
        "settled": False,
        "cycle_id": f"bench-{index}",
    }


def ledger_script() -> str:
    """The installed ``ledger`` launcher beside this interpreter, else the one on PATH."""
    candidate = Path(sys.executable).parent / "ledger"
    found = str(candidate) if candidate.exists() else shutil.which("ledger")
    if found is None:
        raise SystemExit("the `ledger` console script is not installed")
    return found


def out_dir(option: str | None) -> Path:
    """A scratch directory on the repository's disk (``bench/out``) unless one is given."""
    base = Path(option) if option else REPO / "bench" / "out"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=base))


def preimages(count: int) -> Iterator[bytes]:
    """Canonical bytes of ``count`` chained entries.

    Our payloads hold only ASCII strings, integers, booleans and null, for which
    sorted compact ``json.dumps`` is exactly RFC 8785; the hashes link them.
    """
    prev = GENESIS
    for index in range(count):
        entry = {
            "schema_version": "1.1.0",
            "primitive_id": "L2",
            "event_type": "budget.record_call",
            "ts_utc": format_ts(START + dt.timedelta(milliseconds=index)),
            "prev_hash": prev,
            "payload": payload(index),
            "redaction_applied": None,
        }
        data = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode("ascii")
        prev = hashlib.sha256(data).hexdigest()
        yield data


def _sign_chunk(chunk: list[bytes]) -> list[str]:
    key = signer()
    return [key.sign_b64(item) for item in chunk]


def write_chain(path: Path, count: int) -> Path:
    """Write a signed chain of ``count`` entries, signing on every core."""
    key = signer()
    items = list(preimages(count))
    size = 2000
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        signatures = [s for part in pool.map(_sign_chunk, chunks) for s in part]
    with path.open("wb") as handle:
        for item, signature in zip(items, signatures, strict=True):
            handle.write(render_line(item, signature, key.key_id))
    return path


def bare_fsync_rate(directory: Path, count: int) -> float:
    """Appends/s of the minimum durable append: flock, write one 700-byte line, fsync, unlock."""
    scratch = Path(tempfile.mkdtemp(dir=directory))
    line = b"x" * 699 + b"\n"
    lock_fd = os.open(scratch / "bare.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fd = os.open(scratch / "bare.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        began = time.perf_counter()
        for _ in range(count):
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            os.write(fd, line)
            os.fsync(fd)
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
        return count / (time.perf_counter() - began)
    finally:
        os.close(fd)
        os.close(lock_fd)
        shutil.rmtree(scratch, ignore_errors=True)
