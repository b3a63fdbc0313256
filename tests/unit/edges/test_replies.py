"""Replies kept for clients' retries (``ledger.edges.files.replies``)."""

from pathlib import Path

import pytest

from ledger.edges.files import replies as replies_module
from ledger.edges.files.replies import Replies

WRITES = [(1, '{"verdict": "allow"}\n'), (2, "ledger: warning: something\n")]
A, B = "a" * 64, "b" * 64


class TestReplies:
    def test_a_kept_reply_is_given_back_for_the_entry_it_sealed(self, tmp_path: Path):
        """Saved with the entries its run sealed; loaded by request id and one of them."""
        replies = Replies(tmp_path)
        assert replies.save("rq-1", {A}, 0, WRITES)
        assert replies.save("rq-2", {B}, 1, [])
        assert replies.load("rq-1", A) == (0, WRITES)
        assert replies.load("rq-2", B) == (1, [])
        assert (tmp_path / "replies.jsonl").stat().st_mode & 0o777 == 0o600

    def test_a_reply_of_another_run_is_not_given(self, tmp_path: Path):
        """The chain's entry is not one the kept run sealed: no reply."""
        replies = Replies(tmp_path)
        replies.save("rq-1", {A}, 0, WRITES)
        assert replies.load("rq-1", B) is None
        assert replies.load("rq-2", A) is None
        assert replies.load("rq-", A) is None  # a prefix of a kept id is another id

    def test_a_line_cut_short_is_no_reply_and_hides_no_other(self, tmp_path: Path):
        """A crash mid-append leaves a cut line: ignored, and later lines still found."""
        replies = Replies(tmp_path)
        replies.save("rq-1", {A}, 0, WRITES)
        kept = tmp_path / "replies.jsonl"
        kept.write_bytes(kept.read_bytes()[:-20])  # no newline at its end
        replies.save("rq-2", {B}, 0, WRITES)
        assert replies.load("rq-1", A) is None
        assert replies.load("rq-2", B) == (0, WRITES)

    def test_a_full_file_is_moved_aside_and_still_read(self, tmp_path, monkeypatch):
        """Past the size limit the file becomes replies.old.jsonl; both are read."""
        monkeypatch.setattr(replies_module, "ROTATE_BYTES", 150)
        replies = Replies(tmp_path)
        replies.save("rq-1", {A}, 0, WRITES)
        assert (tmp_path / "replies.old.jsonl").exists()
        replies.save("rq-2", {B}, 0, [])
        assert replies.load("rq-1", A) == (0, WRITES)
        assert replies.load("rq-2", B) == (0, [])

    @pytest.mark.parametrize("content", ["[1, 2]", '{"request_id": "rq-1", "code": "0"}'])
    def test_a_line_of_the_wrong_shape_is_no_reply(self, tmp_path: Path, content: str):
        """Whatever else is in the file is never printed."""
        (tmp_path / "replies.jsonl").write_text(content + "\n")
        assert Replies(tmp_path).load("rq-1", A) is None
