"""prove inclusion / consistency and verify-proof on a real home (SPEC §10)."""

import json
from pathlib import Path

import pytest

from ledger.core.merkle import leaf_hash, root_of_leaves

NOW = "2026-03-02T10:00:00Z"


def add_verdicts(run_inproc, home: Path, count: int) -> list[str]:
    refs = []
    for _ in range(count):
        result = run_inproc(
            ["--home", str(home), "verdict", "0.10", "--provider", "openai"],
            env={"LEDGER_NOW": NOW},
        )
        assert result.code == 0, result.stderr
        refs.append(result.json()["verdict_ref"])
    return refs


def checkpoint(run_inproc, home: Path) -> Path:
    result = run_inproc(["--home", str(home), "checkpoint"], env={"LEDGER_NOW": NOW})
    assert result.code == 0, result.stderr
    return Path(result.json()["path"])


def chain_lines(home: Path) -> list[bytes]:
    return (home / "events.jsonl").read_bytes().splitlines(keepends=True)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def proven(home: Path, run_inproc):
    refs = add_verdicts(run_inproc, home, 6)
    return home, refs, checkpoint(run_inproc, home)


class TestCheckpointTreeHead:
    def test_checkpoint_carries_the_rfc9162_root_of_the_entry_hashes(self, proven):
        """tree_size = entries and root_hash = MTH over leaf_hash(entry hash bytes)."""
        home, _refs, cp_path = proven
        document = json.loads(cp_path.read_text())
        from ledger.core.envelope import parse_line

        hashes = [parse_line(raw.rstrip(b"\n")).entry_hash for raw in chain_lines(home)]
        assert document["tree_size"] == document["entries"] == len(hashes)
        expected = root_of_leaves([leaf_hash(bytes.fromhex(h)) for h in hashes]).hex()
        assert document["root_hash"] == expected

    def test_old_checkpoint_without_tree_head_still_verifies(self, proven, run_inproc, tmp_path):
        """A checkpoint signed without tree_size/root_hash still holds the chain."""
        home, _refs, _cp = proven
        from ledger.core.checkpoint import make_checkpoint
        from ledger.core.envelope import parse_line
        from ledger.edges.files.checkpointfiles import load_checkpoint
        from ledger.runtime import Runtime

        runtime = Runtime(home, {"LEDGER_NOW": NOW})
        lines = chain_lines(home)
        cp = load_checkpoint(_cp)
        signer = runtime.keys.active_signer(runtime.keys.load_trust())
        old = make_checkpoint(
            signer,
            cp.chain_id,
            len(lines),
            parse_line(lines[-1].rstrip(b"\n")).entry_hash,
            cp.ts_utc,
        )
        assert "tree_size" not in old.to_document()
        path = write(tmp_path, "old.json", json.dumps(old.to_document()))
        result = run_inproc(["--home", str(home), "verify-chain", "--checkpoint", str(path)])
        assert result.code == 0, result.stderr
        missing = run_inproc(
            ["--home", str(home), "prove", "inclusion", "1", "--checkpoint", str(path)]
        )
        assert missing.code == 1
        assert "no tree head" in missing.stderr


class TestProveInclusion:
    def test_by_number_and_by_hash_agree_and_verify(self, proven, run_inproc, tmp_path):
        """Entry N and its verdict_ref give the same proof, and verify-proof accepts it."""
        home, refs, cp_path = proven
        number = 3  # init writes no entry; the verdicts are entries 1..6
        by_number = run_inproc(["--home", str(home), "prove", "inclusion", str(number)])
        assert by_number.code == 0, by_number.stderr
        proof = by_number.json()
        assert proof["leaf_index"] == number - 1
        assert proof["entry_hash"] == refs[number - 1]
        assert proof["tree_size"] == 6
        by_hash = run_inproc(["--home", str(home), "prove", "inclusion", refs[number - 1]])
        assert by_hash.code == 0, by_hash.stderr
        assert by_hash.json() == proof
        proof_file = write(tmp_path, "proof.json", by_number.stdout)
        line_file = tmp_path / "line.jsonl"
        line_file.write_bytes(chain_lines(home)[number - 1])
        pub = home / "keys"
        key = next(p for p in pub.glob("*.pub.pem"))
        ok = run_inproc(
            ["verify-proof", str(proof_file), "--checkpoint", str(cp_path), "--key", str(key),
             "--entry", str(line_file)]
        )  # fmt: skip
        assert ok.code == 0, ok.stderr
        assert ok.json()["ok"] is True

    def test_entries_appended_after_the_checkpoint_are_caught_up_lazily(self, proven, run_inproc):
        """The index catches up to new entries and proves against a newer checkpoint."""
        home, _refs, _cp = proven
        refs = add_verdicts(run_inproc, home, 5)
        checkpoint(run_inproc, home)
        result = run_inproc(["--home", str(home), "prove", "inclusion", refs[-1]])
        assert result.code == 0, result.stderr
        assert result.json()["tree_size"] == 11
        assert result.json()["leaf_index"] == 10

    def test_unknown_or_malformed_targets(self, proven, run_inproc):
        """An entry past the tree is exit 1; a malformed target is exit 2."""
        home, _refs, _cp = proven
        past = run_inproc(["--home", str(home), "prove", "inclusion", "7"])
        assert past.code == 1
        assert past.stderr.startswith("ledger: ")
        unknown = run_inproc(["--home", str(home), "prove", "inclusion", "ab" * 32])
        assert unknown.code == 1
        bad = run_inproc(["--home", str(home), "prove", "inclusion", "xyz"])
        assert bad.code == 2

    def test_no_checkpoint_is_exit_1(self, home, run_inproc):
        """Without a checkpoint there is no signed root to prove against."""
        add_verdicts(run_inproc, home, 1)
        result = run_inproc(["--home", str(home), "prove", "inclusion", "1"])
        assert result.code == 1
        assert "ledger checkpoint" in result.stderr

    def test_tampered_index_is_refused_and_verify_chain_rebuilds_it(self, proven, run_inproc):
        """A node index that no longer matches the signed root never yields a proof."""
        home, _refs, _cp = proven
        assert run_inproc(["--home", str(home), "prove", "inclusion", "1"]).code == 0
        for name, offset in (("level-02.bin", 0), ("level-01.bin", 32)):
            # (2, 0) is on the root's path; (1, 1) only on leaf 0's audit path.
            path = home / "state" / "merkle" / name
            data = bytearray(path.read_bytes())
            data[offset] ^= 1
            path.write_bytes(bytes(data))
            refused = run_inproc(["--home", str(home), "prove", "inclusion", "1"])
            assert refused.code == 1
            assert "verify-chain" in refused.stderr
            data[offset] ^= 1
            path.write_bytes(bytes(data))
        data = bytearray(path.read_bytes())
        data[offset] ^= 1
        path.write_bytes(bytes(data))
        verified = run_inproc(["--home", str(home), "verify-chain", "--full"])
        assert verified.code == 0
        assert "rebuilt" in verified.stderr
        assert run_inproc(["--home", str(home), "prove", "inclusion", "1"]).code == 0

    def test_deleted_index_is_rebuilt_from_the_chain(self, proven, run_inproc):
        """The index is derived state: removing it costs one rebuild, nothing else."""
        home, _refs, _cp = proven
        for path in (home / "state" / "merkle").iterdir():
            path.unlink()
        assert run_inproc(["--home", str(home), "prove", "inclusion", "6"]).code == 0


class TestConsistency:
    def test_consistency_between_two_checkpoints_verifies(self, proven, run_inproc, tmp_path):
        """A later checkpoint extends an earlier one; swapped or wrong checkpoints fail."""
        home, _refs, old_cp = proven
        add_verdicts(run_inproc, home, 3)
        new_cp = checkpoint(run_inproc, home)
        result = run_inproc(["--home", str(home), "prove", "consistency", str(old_cp), str(new_cp)])
        assert result.code == 0, result.stderr
        proof = result.json()
        assert (proof["old_size"], proof["new_size"]) == (6, 9)
        assert proof["old_root"] == json.loads(old_cp.read_text())["root_hash"]
        proof_file = write(tmp_path, "consistency.json", result.stdout)
        both = run_inproc(
            ["--home", str(home), "verify-proof", str(proof_file),
             "--checkpoint", str(old_cp), "--checkpoint", str(new_cp)]
        )  # fmt: skip
        assert both.code == 0, both.stderr
        bad = dict(proof)
        bad["proof"] = [("0" if h[0] != "0" else "1") + h[1:] for h in proof["proof"]]
        bad_file = write(tmp_path, "bad.json", json.dumps(bad))
        failed = run_inproc(
            ["--home", str(home), "verify-proof", str(bad_file), "--checkpoint", str(new_cp)]
        )
        assert failed.code == 1
        backwards = run_inproc(
            ["--home", str(home), "prove", "consistency", str(new_cp), str(old_cp)]
        )
        assert backwards.code == 1


class TestVerifyProofExitCodes:
    def test_exit_codes_0_1_65(self, proven, run_inproc, tmp_path):
        """0 valid; 1 altered path, wrong entry, other checkpoint; 65 unreadable input."""
        home, _refs, cp_path = proven
        proof = run_inproc(["--home", str(home), "prove", "inclusion", "2"]).json()
        good = write(tmp_path, "good.json", json.dumps(proof))
        args = ["--home", str(home), "verify-proof"]
        assert run_inproc([*args, str(good), "--checkpoint", str(cp_path)]).code == 0
        altered = dict(proof, audit_path=list(reversed(proof["audit_path"])))
        altered_file = write(tmp_path, "altered.json", json.dumps(altered))
        assert run_inproc([*args, str(altered_file), "--checkpoint", str(cp_path)]).code == 1
        wrong_line = tmp_path / "wrong.jsonl"
        wrong_line.write_bytes(chain_lines(home)[0])
        wrong = run_inproc(
            [*args, str(good), "--checkpoint", str(cp_path), "--entry", str(wrong_line)]
        )
        assert wrong.code == 1
        assert "proof names" in wrong.stderr
        missing = run_inproc([*args, str(tmp_path / "nope.json"), "--checkpoint", str(cp_path)])
        assert missing.code == 65
        garbage = write(tmp_path, "garbage.json", "{not json")
        assert run_inproc([*args, str(garbage), "--checkpoint", str(cp_path)]).code == 65
        shapeless = write(tmp_path, "shapeless.json", json.dumps({"leaf_index": 1}))
        assert run_inproc([*args, str(shapeless), "--checkpoint", str(cp_path)]).code == 65
        assert run_inproc([*args, str(good), "--checkpoint", str(tmp_path / "no.json")]).code == 65
        not_entry = write(tmp_path, "line.txt", "hello\n")
        assert (
            run_inproc(
                [*args, str(good), "--checkpoint", str(cp_path), "--entry", str(not_entry)]
            ).code
            == 65
        )

    def test_forged_checkpoint_signature_is_invalid(self, proven, run_inproc, tmp_path):
        """A checkpoint whose signed tree head was edited fails, whatever the proof says."""
        home, _refs, cp_path = proven
        proof = run_inproc(["--home", str(home), "prove", "inclusion", "2"]).json()
        forged = json.loads(cp_path.read_text())
        forged["root_hash"] = "00" * 32
        forged_path = write(tmp_path, "forged.json", json.dumps(forged))
        proof["root_hash"] = "00" * 32
        proof_file = write(tmp_path, "p.json", json.dumps(proof))
        result = run_inproc(
            ["--home", str(home), "verify-proof", str(proof_file), "--checkpoint", str(forged_path)]
        )
        assert result.code == 1
