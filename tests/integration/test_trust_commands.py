"""`ledger keys pin-root` and `ledger keys revoke`: trust-store operations for operators."""

import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.signing import Signer, private_pem


def write_root(tmp_path: Path, seed: bytes) -> tuple[Path, Signer]:
    root = Signer.from_private_key(Ed25519PrivateKey.from_private_bytes(seed))
    path = tmp_path / f"root-{seed[0]}.pem"
    path.write_bytes(private_pem(root.private_key))
    path.chmod(0o600)
    return path, root


def spend(run, home: Path, usd: str = "1") -> None:
    assert run(["--home", str(home), "record", usd, "--provider", "openai"]).code == 0


class TestPinRoot:
    def test_pinned_home_refuses_an_unsigned_trust_store(self, home, run_inproc, tmp_path):
        """After pin-root, a trust store stripped of its root signature is refused (65)."""
        root_file, root = write_root(tmp_path, b"\x01" * 32)
        result = run_inproc(["--home", str(home), "keys", "pin-root", "--root-key", str(root_file)])
        assert result.code == 0, result.stderr
        assert result.json()["root_key_id"] == root.key_id
        spend(run_inproc, home)
        assert run_inproc(["--home", str(home), "verify-chain"]).code == 0
        trust = json.loads((home / "trust.json").read_text())
        trust["root_signature"] = None
        (home / "trust.json").write_text(json.dumps(trust))
        broken = run_inproc(["--home", str(home), "verify-chain"])
        assert broken.code == 65
        assert "root signature" in broken.stderr

    def test_rotation_in_a_pinned_home_needs_the_root(self, home, run_inproc, tmp_path):
        """keys rotate without --root-key is refused and changes nothing."""
        root_file, _ = write_root(tmp_path, b"\x02" * 32)
        run_inproc(["--home", str(home), "keys", "pin-root", "--root-key", str(root_file)])
        spend(run_inproc, home)
        before = (home / "events.jsonl").read_bytes()
        assert run_inproc(["--home", str(home), "keys", "rotate"]).code == 65
        assert (home / "events.jsonl").read_bytes() == before
        rotated = run_inproc(["--home", str(home), "keys", "rotate", "--root-key", str(root_file)])
        assert rotated.code == 0, rotated.stderr
        spend(run_inproc, home)
        assert run_inproc(["--home", str(home), "verify-chain"]).stdout == "OK 3 entries\n"

    def test_a_second_root_is_refused(self, home, run_inproc, tmp_path):
        """A home pins one root; pinning another is refused."""
        first, _ = write_root(tmp_path, b"\x03" * 32)
        second, _ = write_root(tmp_path, b"\x04" * 32)
        assert (
            run_inproc(["--home", str(home), "keys", "pin-root", "--root-key", str(first)]).code
            == 0
        )
        assert (
            run_inproc(["--home", str(home), "keys", "pin-root", "--root-key", str(second)]).code
            == 65
        )


class TestRevoke:
    def test_revoked_key_fails_verification(self, home, run_inproc):
        """Entries signed by a revoked (retired) key no longer verify."""
        spend(run_inproc, home)
        old = json.loads((home / "events.jsonl").read_text().splitlines()[0])["signing_key_id"]
        assert run_inproc(["--home", str(home), "keys", "rotate"]).code == 0
        result = run_inproc(["--home", str(home), "keys", "revoke", old, "--reason", "leaked"])
        assert result.code == 0, result.stderr
        verify = run_inproc(["--home", str(home), "verify-chain"])
        assert verify.code == 1
        assert verify.stderr == f"BROKEN line 1: signing key {old} is revoked\n"

    def test_revocation_from_a_time_spares_earlier_entries(self, home, run_inproc):
        """--at revokes only entries sealed at or after that time."""
        env = {"LEDGER_NOW": "2026-11-22T10:00:00Z"}
        assert run_inproc(["--home", str(home), "record", "1", "--provider", "x"], env).code == 0
        old = json.loads((home / "events.jsonl").read_text().splitlines()[0])["signing_key_id"]
        env = {"LEDGER_NOW": "2026-11-22T11:00:00Z"}
        assert run_inproc(["--home", str(home), "keys", "rotate"], env).code == 0
        revoke = ["--home", str(home), "keys", "revoke", old, "--at", "2026-11-22T10:30:00Z"]
        assert run_inproc(revoke).code == 0
        verify = run_inproc(["--home", str(home), "verify-chain"])
        assert verify.stderr.startswith("BROKEN line 2: "), verify

    def test_active_key_cannot_be_revoked(self, home, run_inproc):
        """Revoking the active key would stop every append: refused with exit 2."""
        spend(run_inproc, home)
        active = json.loads((home / "events.jsonl").read_text().splitlines()[0])["signing_key_id"]
        assert run_inproc(["--home", str(home), "keys", "revoke", active]).code == 2

    def test_unknown_key_is_a_usage_error(self, home, run_inproc):
        """An id the trust store does not list exits 2."""
        assert run_inproc(["--home", str(home), "keys", "revoke", "deadbeef"]).code == 2
