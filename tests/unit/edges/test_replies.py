"""Replies kept for clients' retries (``ledger.edges.replies``)."""

import os
from pathlib import Path

from ledger.edges.replies import KEEP_SECONDS, Replies

WRITES = [(1, '{"verdict": "allow"}\n'), (2, "ledger: warning: something\n")]


class TestReplies:
    def test_a_kept_reply_is_given_back_for_the_entry_it_sealed(self, tmp_path: Path):
        """Saved with the entries its run sealed; loaded by request id and one of them."""
        replies = Replies(tmp_path / "replies")
        assert replies.save("rq-1", {"a" * 64}, 0, WRITES)
        assert replies.load("rq-1", "a" * 64) == (0, WRITES)
        assert (tmp_path / "replies").stat().st_mode & 0o777 == 0o700

    def test_a_reply_of_another_run_is_not_given(self, tmp_path: Path):
        """The chain's entry is not one the kept run sealed: no reply."""
        replies = Replies(tmp_path / "replies")
        replies.save("rq-1", {"a" * 64}, 0, WRITES)
        assert replies.load("rq-1", "b" * 64) is None
        assert replies.load("rq-2", "a" * 64) is None

    def test_a_damaged_reply_is_no_reply(self, tmp_path: Path):
        """A cut or edited file is ignored, never half-printed."""
        replies = Replies(tmp_path / "replies")
        replies.save("rq-1", {"a" * 64}, 0, WRITES)
        (kept,) = (tmp_path / "replies").iterdir()
        kept.write_bytes(kept.read_bytes()[:20])
        assert replies.load("rq-1", "a" * 64) is None
        kept.write_text('{"format": "ledger-reply/1", "request_id": "rq-1", "code": "0"}')
        assert replies.load("rq-1", "a" * 64) is None

    def test_dot_names_stay_inside_the_folder(self, tmp_path: Path):
        """Ids may be "." or ".."; each is still one file in replies/."""
        replies = Replies(tmp_path / "replies")
        assert replies.save("..", {"a" * 64}, 1, WRITES)
        assert replies.load("..", "a" * 64) == (1, WRITES)
        assert [p.parent for p in (tmp_path / "replies").iterdir()] == [tmp_path / "replies"]

    def test_prune_removes_only_replies_far_older_than_the_newest(self, tmp_path: Path):
        """Measured against the newest reply's time, so the wall clock is never read."""
        replies = Replies(tmp_path / "replies")
        replies.save("rq-old", {"a" * 64}, 0, WRITES)
        replies.save("rq-new", {"b" * 64}, 0, WRITES)
        old = next(p for p in (tmp_path / "replies").iterdir() if "rq-old" in p.name)
        stamp = old.stat().st_mtime - KEEP_SECONDS - 10
        os.utime(old, (stamp, stamp))
        replies.prune()
        assert replies.load("rq-old", "a" * 64) is None
        assert replies.load("rq-new", "b" * 64) == (0, WRITES)
