"""``ledger snapshot`` on real homes: files, signatures, refusal, pruning, the chain entry."""

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from ledger.core.envelope import parse_line
from ledger.core.snapshot import SnapshotInvalidError, manifest_from_bytes
from ledger.core.snapshot_check import manifest_signature_problem
from ledger.edges.files.keyfiles import KeyDir
from ledger.runtime import Runtime
from ledger.services.chain.snapshot import load_snapshot
from ledger.services.chain.writer import Writer
from tests.conftest import clean_env, run_process

FIXED_NOW = "2026-06-01T12:00:00Z"
LATER = "2026-06-01T13:00:00Z"

PAYLOAD = {
    "provider": "openai",
    "actual_micros": 1000,
    "utc_day": "2026-11-22",
    "verdict_ref": None,
    "settled": False,
}


def add(home: Path, count: int) -> None:
    """Append ``count`` budget.record_call entries through the real writer."""
    writer = Writer(Runtime(home, environ={}))
    for _ in range(count):
        writer.append_one("budget.record_call", PAYLOAD)


def chain_lines(home: Path) -> list[bytes]:
    return (home / "events.jsonl").read_bytes().splitlines(keepends=True)


def entry(line: bytes):
    return parse_line(line.rstrip(b"\n"))


def tree(home: Path) -> dict[str, bytes]:
    """Every file under the home with its bytes (to prove nothing changed)."""
    return {
        str(path.relative_to(home)): path.read_bytes()
        for path in sorted(home.rglob("*"))
        if path.is_file()
    }


def snapshot(run_inproc, home: Path, now: str | None = None, **env: str):
    extra = dict(env)
    if now is not None:
        extra["LEDGER_NOW"] = now
    return run_inproc(["--home", str(home), "snapshot"], env=extra)


def verify_ok(run_inproc, home: Path) -> int:
    result = run_inproc(["--home", str(home), "verify-chain"])
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("OK ")
    return int(result.stdout.split()[1])


def manifests(home: Path) -> list[Path]:
    return sorted((home / "snapshots").glob("*.manifest.json"))


class TestSnapshotOutput:
    def test_writes_a_signed_compressed_copy_and_its_checkpoint(self, home, run_inproc):
        """Three files: the gzip'd chain byte for byte, its checkpoint, the signed manifest."""
        add(home, 3)
        before = (home / "events.jsonl").read_bytes()
        result = snapshot(run_inproc, home)
        assert result.code == 0, result.stderr
        assert result.stderr == ""
        out = result.json()
        assert set(out) == {"path", "entries", "head_hash", "files"}
        assert out["entries"] == 3
        assert out["head_hash"] == entry(before.splitlines(keepends=True)[-1]).entry_hash

        path = Path(out["path"])
        assert path.parent == home / "snapshots"
        assert path.name.endswith(".manifest.json")
        manifest = manifest_from_bytes(path.read_bytes(), str(path))
        assert (manifest.entries, manifest.head_hash) == (3, out["head_hash"])
        chain_gz = path.parent / manifest.chain_file
        assert gzip.decompress(chain_gz.read_bytes()) == before
        assert chain_gz.stat().st_mode & 0o077 == 0
        assert hashlib.sha256(chain_gz.read_bytes()).hexdigest() == manifest.chain_sha256

        # The same checkpoint is in checkpoints/ ("Checkpoints are written by every snapshot").
        stored = list((home / "checkpoints").glob("checkpoint-*.json"))
        assert len(stored) == 1
        assert stored[0].read_bytes() == (path.parent / manifest.checkpoint_file).read_bytes()
        checkpoint = json.loads(stored[0].read_bytes())
        assert (checkpoint["entries"], checkpoint["head_hash"]) == (3, out["head_hash"])
        assert not list((home / "snapshots").glob(".*.tmp"))

    def test_files_lists_every_file_it_wrote_and_nothing_else(
        self, tmp_path, run_inproc, monkeypatch
    ):
        """`files`: absolute paths that exist, the compressed chain among them, and no
        other file in the snapshot folder created or changed by that snapshot."""
        at = {"LEDGER_NOW": FIXED_NOW}
        home = tmp_path / "fixed"
        init = run_inproc(["--home", str(home), "init", "--daily-cap-usd", "100"], env=at)
        assert init.code == 0, init.stderr
        writer = Writer(Runtime(home, environ=at))
        writer.append_one("budget.record_call", PAYLOAD)
        assert snapshot(run_inproc, home, FIXED_NOW).code == 0  # an earlier one stays
        writer.append_one("budget.record_call", PAYLOAD)
        folder = home / "snapshots"
        before = tree(folder)
        chain = (home / "events.jsonl").read_bytes()

        monkeypatch.chdir(tmp_path)  # a relative --home still gives absolute paths
        result = run_inproc(["--home", "fixed", "snapshot"], env={"LEDGER_NOW": LATER})
        assert result.code == 0, result.stderr
        out = result.json()
        files = [Path(name) for name in out["files"]]
        assert files
        assert len(set(files)) == len(files)
        for path in files:
            assert path.is_absolute(), path
            assert path.is_file(), path
        assert Path(out["path"]).is_absolute()
        assert Path(out["path"]) in files

        manifest_path = Path(out["path"])
        manifest = manifest_from_bytes(manifest_path.read_bytes(), str(manifest_path))
        chain_gz = manifest_path.parent / manifest.chain_file
        assert chain_gz in files
        assert gzip.decompress(chain_gz.read_bytes()) == chain

        after = tree(folder)
        assert set(before) <= set(after)  # nothing pruned
        written = {name for name, data in after.items() if before.get(name) != data}
        assert written == {str(path.relative_to(folder)) for path in files if path.parent == folder}
        # Outside the snapshot folder it writes only the checkpoint copy.
        outside = [path for path in files if path.parent != folder]
        assert [path.parent for path in outside] == [home / "checkpoints"]
        assert outside[0].read_bytes() == (folder / manifest.checkpoint_file).read_bytes()

    def test_the_signature_verifies_with_the_home_trust_store(self, home, run_inproc):
        """The manifest is signed by the writer key; a changed manifest no longer verifies."""
        add(home, 2)
        path = Path(snapshot(run_inproc, home).json()["path"])
        trust = KeyDir(home).load_trust()
        manifest = manifest_from_bytes(path.read_bytes(), str(path))
        assert manifest_signature_problem(manifest, trust) is None
        files = Runtime(home, environ={}).snapshot_files()
        restored = load_snapshot(files, path, manifest, trust)
        assert len(restored.lines) == 2

        document = json.loads(path.read_bytes())
        document["entries"] = 1
        path.write_text(json.dumps(document))
        forged = manifest_from_bytes(path.read_bytes(), str(path))
        with pytest.raises(SnapshotInvalidError, match="signature does not verify"):
            load_snapshot(files, path, forged, trust)

    def test_a_ledger_snapshot_entry_is_appended_and_the_chain_verifies(self, home, run_inproc):
        """The entry names the manifest (relative path, sha256) and the chain snapshotted."""
        add(home, 3)
        out = snapshot(run_inproc, home).json()
        lines = chain_lines(home)
        assert len(lines) == 4
        last = entry(lines[-1])
        assert last.event_type == "ledger.snapshot"
        path = Path(out["path"])
        assert last.payload["path"] == f"snapshots/{path.name}"
        assert last.payload["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert last.payload["entries"] == 3
        assert last.payload["head_hash"] == out["head_hash"] == last.prev_hash
        assert last.payload["chain_id"] == entry(lines[0]).entry_hash
        assert last.payload["pruned"] == []
        assert verify_ok(run_inproc, home) == 4

    def test_snapshot_after_key_rotation(self, home, run_inproc):
        """Snapshots signed before and after a rotation both verify with the home trust store."""
        add(home, 2)
        assert snapshot(run_inproc, home).code == 0
        assert run_inproc(["--home", str(home), "keys", "rotate"]).code == 0
        add(home, 1)
        assert snapshot(run_inproc, home).code == 0
        trust = KeyDir(home).load_trust()
        files = Runtime(home, environ={}).snapshot_files()
        found = manifests(home)
        assert len(found) == 2
        key_ids = set()
        for path in found:
            manifest = manifest_from_bytes(path.read_bytes(), str(path))
            load_snapshot(files, path, manifest, trust)
            key_ids.add(manifest.signing_key_id)
        assert len(key_ids) == 2
        assert verify_ok(run_inproc, home) == 6

    def test_in_a_real_process(self, home):
        """`python -m ledger snapshot` prints one JSON object and exits 0."""
        add(home, 1)
        result = run_process(["--home", str(home), "snapshot"], env=clean_env())
        assert result.code == 0, result.stderr
        assert result.json()["entries"] == 1


class TestRefusal:
    def test_refuses_a_broken_chain_and_writes_nothing(self, home, run_inproc):
        """An edited entry: exit 1, one stderr line, the home byte for byte unchanged."""
        add(home, 3)
        path = home / "events.jsonl"
        lines = chain_lines(home)
        lines[1] = lines[1].replace(b'"actual_micros":1000', b'"actual_micros":1', 1)
        path.write_bytes(b"".join(lines))
        before = tree(home)
        result = snapshot(run_inproc, home)
        assert result.code == 1
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1
        assert result.stderr.startswith(
            "ledger: refusing to snapshot a broken chain: BROKEN line 2: signature does not verify"
        )
        assert tree(home) == before
        assert not (home / "snapshots").exists()
        assert not (home / "checkpoints").exists()

    def test_refuses_a_torn_tail(self, home, run_inproc):
        """A cut last line is a broken chain too."""
        add(home, 2)
        with (home / "events.jsonl").open("ab") as handle:
            handle.write(b'{"schema_version":"1.1.0","pri')
        before = tree(home)
        result = snapshot(run_inproc, home)
        assert result.code == 1
        assert "BROKEN line 3: torn line" in result.stderr
        assert tree(home) == before

    def test_refuses_a_chain_shorter_than_its_checkpoint(self, home, run_inproc):
        """A tail cut at a line boundary is caught by the newest checkpoint."""
        add(home, 4)
        assert snapshot(run_inproc, home).code == 0
        path = home / "events.jsonl"
        path.write_bytes(b"".join(chain_lines(home)[:2]))
        before = tree(home)
        result = snapshot(run_inproc, home)
        assert result.code == 1
        assert "BROKEN line 3: entry missing" in result.stderr
        assert tree(home) == before

    def test_refuses_an_empty_chain(self, home, run_inproc):
        """Nothing to snapshot: exit 1, nothing written."""
        result = snapshot(run_inproc, home)
        assert result.code == 1
        assert result.stderr == "ledger: the chain is empty: nothing to snapshot\n"
        assert not (home / "snapshots").exists()


class TestPruning:
    def test_snapshots_older_than_keep_days_are_pruned(self, home, run_inproc):
        """Age is judged by the snapshot's checkpoint time against the clock (LEDGER_NOW)."""
        add(home, 2)
        first = snapshot(run_inproc, home, "2030-01-01T04:00:00Z").json()["path"]
        second = snapshot(run_inproc, home, "2030-01-20T04:00:00Z").json()["path"]
        assert len(manifests(home)) == 2
        third = snapshot(run_inproc, home, "2030-02-05T04:00:00Z").json()["path"]
        assert manifests(home) == sorted([Path(second), Path(third)])
        stem = Path(first).name.removesuffix(".manifest.json")
        assert not list((home / "snapshots").glob(f"{stem}*"))
        last = entry(chain_lines(home)[-1])
        assert last.payload["pruned"] == [f"snapshots/{Path(first).name}"]
        # Checkpoints are not pruned.
        assert len(list((home / "checkpoints").glob("*.json"))) == 3
        assert verify_ok(run_inproc, home) == 5

    def test_keep_days_zero_keeps_only_the_newest(self, home, run_inproc):
        """snapshot.keep_days from the environment; the newest is never pruned."""
        add(home, 1)
        snapshot(run_inproc, home, "2030-01-01T04:00:00Z")
        snapshot(run_inproc, home, "2030-01-02T04:00:00Z")
        newest = snapshot(run_inproc, home, "2030-01-03T04:00:00Z", LEDGER_SNAPSHOT_KEEP_DAYS="0")
        assert newest.code == 0, newest.stderr
        assert manifests(home) == [Path(newest.json()["path"])]
        assert len(entry(chain_lines(home)[-1]).payload["pruned"]) == 2

    def test_young_snapshots_are_kept(self, home, run_inproc):
        """Within keep_days nothing is pruned."""
        add(home, 1)
        for day in ("01", "10", "29"):
            assert snapshot(run_inproc, home, f"2030-01-{day}T04:00:00Z").code == 0
        assert len(manifests(home)) == 3
