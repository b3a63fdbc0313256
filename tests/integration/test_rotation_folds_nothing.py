"""A key rotation's next verdict refolds nothing; a revocation's verifies the chain again (SPEC §21).

A rotation only adds a key and ends the old one's validity from the rotation
on: every entry already verified still verifies, so the state verified under
the old trust store is carried over to the new one, and the next verdict
folds only the rotation's own entry. Trusting another writer's key only adds
one too: the next verdict folds nothing. A revocation can make
past entries stop verifying: when it does, the state is not carried over, and
the next verdict verifies the whole chain under the revoked trust store, and
halts; when it fails no entry (a retired key revoked from after its last
signature), the state is carried over as after a rotation.
"""

import json
from pathlib import Path
from typing import Any

from ledger.core.trust import trust_fingerprint
from ledger.runtime import Runtime
from ledger.services.chain import home as chain_home
from tests.helpers.folds import folds

__all__ = ["folds"]  # the fixture, used by name

DAY = "2026-03-02T10:00:00Z"


def _verdict(run_inproc: Any, home: Path) -> Any:
    return run_inproc(
        ["--home", str(home), "verdict", "0.01", "--provider", "openai"], env={"LEDGER_NOW": DAY}
    )


def _rotated(run_inproc: Any, home: Path) -> str:
    for _ in range(3):
        assert _verdict(run_inproc, home).code == 0
    rotated = run_inproc(["--home", str(home), "keys", "rotate"], env={"LEDGER_NOW": DAY})
    assert rotated.code == 0, rotated.stderr
    old_key_id: str = rotated.json()["old_key_id"]
    return old_key_id


def test_the_verdict_after_a_rotation_folds_only_the_rotation(
    run_inproc: Any, home: Path, folds: list[tuple[int, int]]
) -> None:
    """The state verified under the old trust store is carried over: only the tail is folded."""
    _rotated(run_inproc, home)
    rotation = (home / "events.jsonl").read_bytes().splitlines(keepends=True)[-1]
    folds.clear()
    assert _verdict(run_inproc, home).code == 0
    # The one entry sealed since the state was saved: the rotation's own.
    assert len(folds) == 1
    start, end = folds[0]
    assert start > 0
    assert end - start == len(rotation)
    assert run_inproc(["--home", str(home), "verify-chain"]).code == 0


def test_the_verdict_after_a_revocation_verifies_the_whole_chain_again(
    run_inproc: Any, home: Path, folds: list[tuple[int, int]]
) -> None:
    """A key revoked entirely makes past entries fail: the state is verified afresh, and halts."""
    old_key_id = _rotated(run_inproc, home)
    revoked = run_inproc(
        ["--home", str(home), "keys", "revoke", old_key_id, "--reason", "lost"],
        env={"LEDGER_NOW": DAY},
    )
    assert revoked.code == 0, revoked.stderr
    folds.clear()
    halted = _verdict(run_inproc, home)
    assert halted.code != 0  # entries signed by a key revoked entirely no longer verify
    assert folds
    assert folds[0][0] == 0  # from line 1


def test_the_verdict_after_trusting_another_writers_key_folds_nothing(
    run_inproc: Any, home: Path, tmp_path: Path, folds: list[tuple[int, int]]
) -> None:
    """One key more fails no verified entry: the state is carried over, nothing is verified again."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    for _ in range(3):
        assert _verdict(run_inproc, home).code == 0
    pem = tmp_path / "other.pub.pem"
    pem.write_bytes(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    trusted = run_inproc(
        ["--home", str(home), "keys", "trust", f"other-writer={pem}"], env={"LEDGER_NOW": DAY}
    )
    assert trusted.code == 0, trusted.stderr
    assert trusted.json()["changed"] is True
    folds.clear()
    assert _verdict(run_inproc, home).code == 0
    assert folds == []  # the state's head is the chain's: nothing to verify or fold
    assert run_inproc(["--home", str(home), "verify-chain"]).code == 0


def _revoke(run_inproc: Any, home: Path, key_id: str, at: str) -> None:
    revoked = run_inproc(
        ["--home", str(home), "keys", "revoke", key_id, "--at", at, "--reason", "laptop lost"],
        env={"LEDGER_NOW": LATER},
    )
    assert revoked.code == 0, revoked.stderr


LATER = "2026-03-02T11:00:00Z"


def test_a_revocation_that_fails_no_entry_folds_nothing(
    run_inproc: Any, home: Path, folds: list[tuple[int, int]]
) -> None:
    """A retired key revoked from after its last signature: what was verified stays verified."""
    old_key_id = _rotated(run_inproc, home)
    assert run_inproc(["--home", str(home), "checkpoint"], env={"LEDGER_NOW": DAY}).code == 0
    _revoke(run_inproc, home, old_key_id, LATER)
    folds.clear()
    assert _verdict(run_inproc, home).code == 0
    # Carried over: only the tail the state had not folded yet (the rotation).
    assert folds
    assert all(start > 0 for start, _end in folds)
    checked = run_inproc(["--home", str(home), "verify-chain"], env={"LEDGER_NOW": LATER})
    assert checked.code == 0, checked.stderr
    trust = Runtime(home, {}).keys.load_trust()
    assert any(revocation.key_id == old_key_id for revocation in trust.revocations)
    mark = json.loads((home / "state" / "verified-mark.json").read_bytes())
    assert mark["trust_sha256"] == trust_fingerprint(trust)  # carried: the next one resumes


def test_an_entry_appended_after_the_unlocked_scan_is_read_under_the_lock(
    run_inproc: Any, home: Path, folds: list[tuple[int, int]], monkeypatch: Any
) -> None:
    """The scan without the lock stops at the head it read; the lines after it are read under it."""
    for _ in range(3):
        early = run_inproc(
            ["--home", str(home), "verdict", "0.01", "--provider", "openai"],
            env={"LEDGER_NOW": "2026-03-02T09:00:00Z"},
        )
        assert early.code == 0
    rotated = run_inproc(["--home", str(home), "keys", "rotate"], env={"LEDGER_NOW": DAY})
    assert rotated.code == 0, rotated.stderr
    old_key_id = rotated.json()["old_key_id"]
    assert _verdict(run_inproc, home).code == 0  # the state now holds the rotation
    lines = (home / "events.jsonl").read_bytes().splitlines(keepends=True)
    rotation = next(i for i, line in enumerate(lines) if b'"ledger.key_rotated"' in line)
    # As if the rotation (signed by the old key at DAY) were appended after the scan.
    before_rotation = sum(len(line) for line in lines[:rotation])
    monkeypatch.setattr(chain_home, "head_bound", lambda _chain: before_rotation)
    _revoke(run_inproc, home, old_key_id, "2026-03-02T09:30:00Z")
    folds.clear()
    assert _verdict(run_inproc, home).code != 0  # the rotation's own entry no longer verifies
    assert folds
    assert folds[0][0] == 0
