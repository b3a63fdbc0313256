"""Writer keys: ``ledger init`` and ``ledger keys rotate`` (SPEC §1-§3)."""

import base64
import datetime as dt
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.core.envelope import parse_line
from ledger.core.seal import seal
from ledger.core.signing import Signer, private_pem, public_pem, public_raw_from_pem
from ledger.edges.fileio import exclusive_create
from ledger.edges.files.keyfiles import KeyDir
from ledger.errors import KeyFileError
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer
from tests.helpers.chains import record_payload


def _key_files(home: Path) -> list[Path]:
    return sorted((home / "keys").glob("*.key.pem"))


def _trust(home: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((home / "trust.json").read_bytes())
    return document


def _entries(home: Path):
    return [parse_line(raw) for raw in (home / "events.jsonl").read_bytes().splitlines()]


def _append(home: Path, count: int, first: int = 0) -> None:
    writer = Writer(Runtime(home))
    for index in range(count):
        writer.append_one("budget.record_call", record_payload(first + index))


def _verify_ok(run_inproc, home: Path, entries: int) -> None:
    result = run_inproc(["--home", str(home), "verify-chain"])
    assert (result.code, result.stdout) == (0, f"OK {entries} entries\n"), result


class TestInit:
    def test_creates_private_key_0600(self, run_inproc, tmp_path):
        """init makes one Ed25519 key file of mode 0600 in a 0700 directory, named by its id."""
        home = tmp_path / "h"
        result = run_inproc(["--home", str(home), "init", "--daily-cap-usd", "5"])
        assert result.code == 0, result
        output = result.json()
        assert output["created_key"] is True
        [key_file] = _key_files(home)
        assert key_file.name == f"{output['key_id']}.key.pem"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert stat.S_IMODE((home / "keys").stat().st_mode) == 0o700
        signer = KeyDir(home).load_signer(output["key_id"])
        assert signer.key_id == output["key_id"]
        assert [k["key_id"] for k in _trust(home)["keys"]] == [output["key_id"]]

    def test_second_init_never_overwrites(self, run_inproc, home):
        """A second init keeps the key (same id, same bytes) and makes no new one."""
        [key_file] = _key_files(home)
        before = key_file.read_bytes()
        trust_before = (home / "trust.json").read_bytes()
        result = run_inproc(["--home", str(home), "init", "--daily-cap-usd", "100"])
        assert result.code == 0, result
        assert result.json()["created_key"] is False
        assert result.json()["key_id"] == key_file.name.removesuffix(".key.pem")
        assert _key_files(home) == [key_file]
        assert key_file.read_bytes() == before
        assert (home / "trust.json").read_bytes() == trust_before

    def test_generate_never_overwrites_a_key_file(self, home):
        """Key files are created exclusively: an existing file is never replaced."""
        [key_file] = _key_files(home)
        with pytest.raises(FileExistsError):
            exclusive_create(key_file, b"other", 0o600)
        assert key_file.read_bytes() != b"other"


class TestKeyFileMode:
    @pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
    def test_loose_mode_refused(self, run_inproc, home, mode):
        """A key file readable or writable by group or others is refused: exit 65, one line."""
        [key_file] = _key_files(home)
        key_file.chmod(mode)
        result = run_inproc(["--home", str(home), "keys", "rotate"])
        assert result.code == 65, result
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("ledger: ")
        assert f"{mode:04o}" in lines[0]
        assert not (home / "events.jsonl").exists() or not _entries(home)

    def test_loose_mode_refused_by_writer(self, home):
        """Appending with a 0644 key raises KeyFileError and writes nothing."""
        [key_file] = _key_files(home)
        key_file.chmod(0o644)
        with pytest.raises(KeyFileError, match="chmod 600"):
            _append(home, 1)
        assert not (home / "events.jsonl").exists()

    def test_checkpoint_refuses_loose_key(self, run_inproc, home):
        """Every command that signs refuses the loose key, e.g. checkpoint."""
        _append(home, 1)
        [key_file] = _key_files(home)
        key_file.chmod(0o644)
        result = run_inproc(["--home", str(home), "checkpoint"])
        assert result.code == 65, result
        assert len(result.stderr.splitlines()) == 1

    def test_key_file_holding_another_key(self, home):
        """A key file whose content is another key is refused."""
        [key_file] = _key_files(home)
        key_file.write_bytes(private_pem(Ed25519PrivateKey.generate()))
        key_file.chmod(0o600)
        with pytest.raises(KeyFileError, match="holds key"):
            _append(home, 1)


class TestRotate:
    def test_rotation_entry_signed_by_old_key_names_new(self, run_inproc, home):
        """rotate appends ledger.key_rotated signed by the old key, naming the new key."""
        _append(home, 2)
        [old_file] = _key_files(home)
        old_id = old_file.name.removesuffix(".key.pem")
        result = run_inproc(["--home", str(home), "keys", "rotate"])
        assert result.code == 0, result
        output = result.json()
        assert output["old_key_id"] == old_id
        new_id = output["new_key_id"]
        assert new_id != old_id

        rotation = _entries(home)[-1]
        assert rotation.event_type == "ledger.key_rotated"
        assert rotation.signing_key_id == old_id
        assert rotation.entry_hash == output["entry_hash"]
        assert rotation.ts_utc == output["rotated_at"]
        assert rotation.payload["old_key_id"] == old_id
        assert rotation.payload["new_key_id"] == new_id
        new_public = public_raw_from_pem(
            (home / "keys" / f"{new_id}.pub.pem").read_bytes(), "new key"
        )
        assert base64.b64decode(rotation.payload["new_public_key"]) == new_public

        new_file = home / "keys" / f"{new_id}.key.pem"
        assert stat.S_IMODE(new_file.stat().st_mode) == 0o600
        assert old_file.exists()
        _verify_ok(run_inproc, home, 3)

    def test_trust_store_windows(self, run_inproc, home):
        """The old key's valid_until and the new key's valid_from are the rotation time."""
        _append(home, 1)
        output = run_inproc(["--home", str(home), "keys", "rotate"]).json()
        keys = {k["key_id"]: k for k in _trust(home)["keys"]}
        assert keys[output["old_key_id"]]["valid_until"] == output["rotated_at"]
        assert keys[output["new_key_id"]]["valid_from"] == output["rotated_at"]
        assert keys[output["new_key_id"]]["valid_until"] is None

    def test_entries_after_rotation_signed_by_new_key(self, run_inproc, home):
        """Entries appended after a rotation carry the new key id, and the chain verifies."""
        _append(home, 2)
        new_id = run_inproc(["--home", str(home), "keys", "rotate"]).json()["new_key_id"]
        _append(home, 3, first=10)
        assert [e.signing_key_id for e in _entries(home)[-3:]] == [new_id] * 3
        _verify_ok(run_inproc, home, 6)

    def test_rotate_twice(self, run_inproc, home):
        """Two rotations in a row leave a verifying chain signed by three keys."""
        _append(home, 1)
        first = run_inproc(["--home", str(home), "keys", "rotate"]).json()
        second = run_inproc(["--home", str(home), "keys", "rotate"]).json()
        assert second["old_key_id"] == first["new_key_id"]
        _append(home, 1, first=5)
        ids = [e.signing_key_id for e in _entries(home)]
        assert len(set(ids)) == 3
        _verify_ok(run_inproc, home, 4)

    def test_rotate_on_empty_chain(self, run_inproc, home):
        """Rotating before any entry starts the chain with the rotation (GENESIS link)."""
        result = run_inproc(["--home", str(home), "keys", "rotate"])
        assert result.code == 0, result
        [entry] = _entries(home)
        assert entry.prev_hash == "GENESIS"
        _verify_ok(run_inproc, home, 1)

    def test_old_key_cannot_sign_after_rotation(self, run_inproc, home):
        """An entry signed by the retired key after the rotation time fails verification."""
        _append(home, 1)
        output = run_inproc(["--home", str(home), "keys", "rotate"]).json()
        old = KeyDir(home).load_signer(output["old_key_id"])
        runtime = Runtime(home)
        writer = Writer(runtime)
        with runtime.chain.transaction() as tx, pytest.raises(KeyFileError, match="not valid at"):
            # Our writer refuses to seal what its own verifier would reject...
            writer.append(tx, "budget.record_call", record_payload(9), signer=old)
        with runtime.chain.transaction() as tx:
            # ...so seal as a holder of the leaked key would, outside the writer.
            head = tx.head()
            assert head is not None
            sealed = seal(
                "budget.record_call", record_payload(9), runtime.schema("budget.record_call"),
                moment=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5),
                prev_hash=head.entry_hash, signer=old,
            )  # fmt: skip
            tx.append(sealed.line)
        result = run_inproc(["--home", str(home), "verify-chain"])
        assert result.code == 1
        assert result.stderr.startswith("BROKEN line 3: ")
        assert "not valid at" in result.stderr

    def test_writer_started_before_rotation(self, run_inproc, home):
        """A long-lived Writer appending after a rotation signs with the new key."""
        writer = Writer(Runtime(home))
        writer.append_one("budget.record_call", record_payload(0))
        assert run_inproc(["--home", str(home), "keys", "rotate"]).code == 0
        writer.append_one("budget.record_call", record_payload(1))
        _verify_ok(run_inproc, home, 3)

    def test_rotate_with_pinned_root(self, run_inproc, home, tmp_path):
        """In a home that pins a root key, rotate --root-key re-signs the trust store."""
        root = Signer.from_private_key(Ed25519PrivateKey.from_private_bytes(b"\x42" * 32))
        keys = KeyDir(home)
        keys.save_trust(keys.load_trust(), root)
        (home / "trust-root.pub.pem").write_bytes(public_pem(root.public_raw))
        root_file = tmp_path / "root.pem"
        root_file.write_bytes(private_pem(root.private_key))
        root_file.chmod(0o600)
        _append(home, 1)
        result = run_inproc(["--home", str(home), "keys", "rotate", "--root-key", str(root_file)])
        assert result.code == 0, result
        assert _trust(home)["root_signature"]["key_id"] == root.key_id
        _verify_ok(run_inproc, home, 2)

    def test_rotate_pinned_root_without_root_key_is_refused(self, run_inproc, home):
        """Without --root-key a root-pinned home refuses to rotate and stays usable."""
        root = Signer.from_private_key(Ed25519PrivateKey.from_private_bytes(b"\x43" * 32))
        keys = KeyDir(home)
        keys.save_trust(keys.load_trust(), root)
        (home / "trust-root.pub.pem").write_bytes(public_pem(root.public_raw))
        _append(home, 1)
        result = run_inproc(["--home", str(home), "keys", "rotate"])
        assert result.code != 0
        _verify_ok(run_inproc, home, 1)
