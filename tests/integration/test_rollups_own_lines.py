"""A writer's own rollup follower trusts the lines it sealed itself, and only those."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ledger.core.trust
from ledger.errors import ChainBrokenError
from ledger.runtime import Runtime
from ledger.services.chain.sealed_here import forget_all
from ledger.services.views.rollups import catch_up
from tests.helpers.segments import append_records

ENV = {"LEDGER_NOW": "2026-11-22T08:00:00Z"}


@pytest.fixture
def signature_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each Ed25519 check the trust store makes, counted (the real check still runs)."""
    checks: list[int] = []
    real = vars(ledger.core.trust)["verify_b64"]

    def counted(public: bytes, signature: str, preimage: bytes) -> bool:
        checks.append(1)
        return bool(real(public, signature, preimage))

    monkeypatch.setattr(ledger.core.trust, "verify_b64", counted)
    forget_all()
    return checks


def _caught(home: Path) -> int:
    return catch_up(Runtime(home, ENV)).folded


def test_lines_this_process_sealed_are_not_checked_again(home: Path, signature_checks):
    _caught(home)
    signature_checks.clear()
    append_records(home, 5, env=ENV)
    assert _caught(home) == 5
    assert signature_checks == []


def test_lines_another_process_sealed_are_checked(home: Path, signature_checks):
    _caught(home)
    argv = [sys.executable, "-m", "ledger", "--home", str(home), "record", "0.01",
            "--provider", "openai"]  # fmt: skip
    done = subprocess.run(
        argv, env={**ENV, "PATH": "/usr/bin:/bin"}, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    signature_checks.clear()
    assert _caught(home) >= 1
    assert len(signature_checks) >= 1


def test_an_own_line_edited_after_sealing_is_checked_and_refused(home: Path, signature_checks):
    _caught(home)
    append_records(home, 3, env=ENV)
    chain = home / "events.jsonl"
    lines = chain.read_bytes().splitlines(keepends=True)
    second, last = json.loads(lines[-2]), json.loads(lines[-1])
    second["signature"] = last["signature"]  # same entry, a signature that does not verify
    lines[-2] = json.dumps(second, separators=(",", ":")).encode() + b"\n"
    chain.write_bytes(b"".join(lines))
    with pytest.raises(ChainBrokenError, match="signature does not verify"):
        _caught(home)
