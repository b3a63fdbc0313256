"""Golden vectors for the chain envelope (format 1.1.0).

Each vector seals one entry from a fixed Ed25519 seed, a fixed time and a fixed
payload, and records the canonical bytes, the entry hash, the signature and the
full line. The vectors also form one valid chain, in file-name order.

    python tests/vectors/generate.py           # check the files, exit 1 if stale
    python tests/vectors/generate.py --write   # regenerate tests/vectors/envelopes/

``tests/unit/core/test_vectors.py`` regenerates them in memory and compares
them byte for byte with the files.
"""

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.canonical import canonical_bytes, sha256_hex
from ledger.core.envelope import GENESIS, render_line, unsigned_entry
from ledger.core.seal import seal
from ledger.core.signing import Signer
from ledger.core.timefmt import format_ts
from ledger.edges.schemas import load_schema

ENVELOPES = Path(__file__).resolve().parent / "envelopes"
REGENERATE = "python tests/vectors/generate.py --write"

SEED_A = bytes.fromhex("a1" * 32)
SEED_B = bytes.fromhex("b2" * 32)
START = dt.datetime(2026, 11, 22, 8, 0, 0, 123456, tzinfo=dt.UTC)


def _signer(seed: bytes) -> Signer:
    return Signer.from_private_key(Ed25519PrivateKey.from_private_bytes(seed))


def _cases() -> list[dict[str, Any]]:
    b_key = _signer(SEED_B)
    return [
        {
            "name": "01-record-call-genesis",
            "description": "First entry of a chain: prev_hash GENESIS, minimal payload.",
            "seed": SEED_A,
            "event_type": "budget.record_call",
            "payload": {
                "provider": "openai",
                "actual_micros": 1000,
                "utc_day": "2026-11-22",
                "verdict_ref": None,
                "settled": False,
            },
        },
        {
            "name": "02-record-call-all-fields",
            "description": "Every optional field; links to vector 01.",
            "seed": SEED_A,
            "event_type": "budget.record_call",
            "payload": {
                "provider": "anthropic",
                "actual_micros": 2500000,
                "utc_day": "2026-11-22",
                "verdict_ref": "0" * 63 + "1",
                "settled": True,
                "model_id": "claude-x",
                "cycle_id": "cycle-7",
                "input_tokens": 1200,
                "output_tokens": 0,
            },
        },
        {
            "name": "03-record-call-unicode",
            "description": "RFC 8785 string escaping: non-ASCII kept as UTF-8, controls escaped.",
            "seed": SEED_A,
            "event_type": "budget.record_call",
            "payload": {
                "provider": "p_1-x",
                "actual_micros": 0,
                "utc_day": "2026-11-22",
                "verdict_ref": None,
                "settled": False,
                "model_id": 'caf\u00e9 \u6a21\u578b \U0001f600 \u2028 "q" \\ \u0007\t\n/',
                "cycle_id": "\u20ac\u00a0\u0000",
            },
        },
        {
            "name": "04-record-call-max-safe-integer",
            "description": "The largest integer RFC 8785 represents exactly (2**53 - 1).",
            "seed": SEED_A,
            "event_type": "budget.record_call",
            "payload": {
                "provider": "openai",
                "actual_micros": 2**53 - 1,
                "utc_day": "2026-11-22",
                "verdict_ref": None,
                "settled": False,
                "input_tokens": None,
                "output_tokens": None,
            },
        },
        {
            "name": "05-key-rotated",
            "description": "Key A names its successor B; signed by A.",
            "seed": SEED_A,
            "event_type": "ledger.key_rotated",
            "payload": {
                "old_key_id": _signer(SEED_A).key_id,
                "new_key_id": b_key.key_id,
                "new_public_key": _b64(b_key.public_raw),
            },
        },
        {
            "name": "06-record-call-second-key",
            "description": "The first entry signed by key B.",
            "seed": SEED_B,
            "event_type": "budget.record_call",
            "payload": {
                "provider": "openai",
                "actual_micros": 1,
                "utc_day": "2026-11-23",
                "verdict_ref": None,
                "settled": False,
            },
        },
        {
            "name": "07-redaction-applied",
            "description": "redaction_applied as a list of pattern ids (sealed by hand).",
            "seed": SEED_B,
            "event_type": "budget.record_call",
            "payload": {
                "provider": "openai",
                "actual_micros": 42,
                "utc_day": "2026-11-23",
                "verdict_ref": None,
                "settled": False,
                "model_id": "[REDACTED]",
            },
            "redaction_applied": ["email", "api_key"],
        },
    ]


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")


def build_vectors() -> list[dict[str, Any]]:
    """Every vector, in chain order; pure function of the constants above."""
    vectors = []
    prev_hash = GENESIS
    for index, case in enumerate(_cases()):
        key = _signer(case["seed"])
        moment = START + dt.timedelta(minutes=index, microseconds=index)
        redaction = case.get("redaction_applied")
        if redaction is None:
            sealed = seal(
                case["event_type"],
                case["payload"],
                load_schema(case["event_type"]),
                moment=moment,
                prev_hash=None if prev_hash == GENESIS else prev_hash,
                signer=key,
            )
            line, entry_hash = sealed.line, sealed.entry_hash
            preimage = canonical_bytes(sealed.entry)
        else:
            entry = unsigned_entry(
                case["event_type"], case["payload"], format_ts(moment), prev_hash, redaction
            )
            preimage = canonical_bytes(entry)
            entry_hash = sha256_hex(preimage)
            line = render_line(preimage, key.sign_b64(preimage), key.key_id)
        signature = line[line.rfind(b',"signature":"') :].split(b'"')[3].decode("ascii")
        vectors.append(
            {
                "name": case["name"],
                "description": case["description"],
                "seed_hex": case["seed"].hex(),
                "public_key_hex": key.public_raw.hex(),
                "signing_key_id": key.key_id,
                "event_type": case["event_type"],
                "ts_utc": format_ts(moment),
                "prev_hash": prev_hash,
                "redaction_applied": redaction,
                "payload": case["payload"],
                "canonical_hex": preimage.hex(),
                "entry_hash": entry_hash,
                "signature": signature,
                "line": line.decode("utf-8"),
            }
        )
        prev_hash = entry_hash
    return vectors


def render(vector: dict[str, Any]) -> bytes:
    """A vector's file content."""
    return (json.dumps(vector, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def expected_files() -> dict[str, bytes]:
    """File name → content, for every vector."""
    return {f"{vector['name']}.json": render(vector) for vector in build_vectors()}


def stale_files(directory: Path = ENVELOPES) -> list[str]:
    """Names of vector files that are missing, different, or not generated."""
    expected = expected_files()
    present = {path.name for path in directory.glob("*.json")} if directory.is_dir() else set()
    problems = sorted(name for name in present - set(expected))
    for name, content in expected.items():
        path = directory / name
        if not path.is_file() or path.read_bytes() != content:
            problems.append(name)
    return problems


def main(argv: list[str] | None = None) -> int:
    """Check (default) or ``--write`` the vector files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="regenerate the files")
    args = parser.parse_args(argv)
    if args.write:
        ENVELOPES.mkdir(parents=True, exist_ok=True)
        for stale in ENVELOPES.glob("*.json"):
            stale.unlink()
        for name, content in expected_files().items():
            (ENVELOPES / name).write_bytes(content)
        print(f"wrote {len(expected_files())} vectors to {ENVELOPES}")
        return 0
    problems = stale_files()
    if problems:
        print(f"stale vectors: {', '.join(problems)}; run `{REGENERATE}`", file=sys.stderr)
        return 1
    print("vectors up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
