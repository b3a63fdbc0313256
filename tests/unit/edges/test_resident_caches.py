"""What a long-lived process remembers between requests, and when it must not.

``ledger serve`` answers thousands of requests in one process. It keeps parsed
files (by their exact bytes), the chain's head (by the file's identity), parsed
command lines, and the batch's derived state in memory. Each test shows a case
where remembering would be wrong, and that it is not done there.
"""

import errno
import os
from pathlib import Path

import pytest

from ledger.cli.percall.parser import build_parser
from ledger.cli.percall.parser import run as run_fast
from ledger.edges import memo
from ledger.edges.configfile import load_config
from ledger.edges.files.chainfile import ChainFile, CorruptTailError, read_head
from ledger.edges.files.groupcommit import GroupCommitError, group_commit
from ledger.edges.files.keptstate import KeptStates, keeping
from ledger.edges.files.keyfiles import KeyDir
from ledger.edges.files.statefile import StateFile
from ledger.runtime import Runtime
from ledger.services.chain.writer import Writer
from tests.helpers.chains import record_payload

NOW = {"LEDGER_NOW": "2026-11-22T08:00:00Z"}


def _append(home: Path, index: int) -> None:
    Writer(Runtime(home, dict(NOW))).append_one("budget.record_call", record_payload(index))


class TestRememberedFiles:
    def test_a_changed_config_is_parsed_again(self, home):
        """Same path, new bytes: the new cap, never the remembered one."""
        path = home / "ledger.toml"
        first = load_config(path, {})
        assert load_config(path, {}) is first  # the same bytes: parsed once
        text = path.read_text().replace("daily_cap = ", "daily_cap = 1")
        path.write_text(text)
        assert load_config(path, {}) != first

    def test_a_config_depends_on_the_ledger_variables(self, home):
        """The same file under another LEDGER_* override is another Config."""
        path = home / "ledger.toml"
        plain = load_config(path, {})
        overridden = load_config(path, {"LEDGER_USD_RESERVATION_TTL_SECONDS": "7"})
        assert overridden.reservation_ttl_seconds == 7
        assert plain.reservation_ttl_seconds != 7
        assert load_config(path, {"UNRELATED": "x"}) is plain

    def test_an_invalid_config_fails_every_time(self, home):
        """An error is not remembered as a value: each load raises it again."""
        path = home / "ledger.toml"
        path.write_text("[usd]\nnot_a_key = 1\n")
        for _ in range(2):
            with pytest.raises(Exception, match=r"unknown key usd\.not_a_key"):
                load_config(path, {})

    def test_a_replaced_key_file_is_loaded_again(self, home, tmp_path):
        """The key file's bytes decide: a different key in the same file is seen."""
        keys = KeyDir(home)
        key_id = keys.active_signer(keys.load_trust()).key_id
        other = KeyDir(tmp_path / "other")
        new = other.generate()
        path = keys.private_path(key_id)
        path.write_bytes(other.private_path(new.key_id).read_bytes())
        with pytest.raises(Exception, match=f"holds key {new.key_id}"):
            keys.load_signer(key_id)

    def test_the_trust_store_is_read_once_across_key_dirs(self, home, monkeypatch):
        """A fresh ``KeyDir`` per request reads an unchanged trust store from memory."""
        from ledger.edges import fileio
        from ledger.edges.files import keyfiles

        monkeypatch.setattr(fileio, "SETTLED_NS", -(10**18))  # as if written long ago
        KeyDir(home).load_trust()
        reads: list[Path] = []

        def counted(path: Path, what: str) -> bytes:
            reads.append(path)
            return fileio.read_user_file(path, what)

        monkeypatch.setattr(keyfiles, "read_user_file", counted)
        KeyDir(home).load_trust()
        assert reads == []

    def test_a_trust_store_changed_just_now_is_read_every_time(self, home, monkeypatch):
        """Within SETTLED_NS of its last change a file is not remembered: on a
        file system with coarse timestamps a second change could keep its identity."""
        from ledger.edges import fileio
        from ledger.edges.files import keyfiles

        monkeypatch.setattr(fileio, "SETTLED_NS", 10**18)  # every file changed "just now"
        reads: list[Path] = []

        def counted(path: Path, what: str) -> bytes:
            reads.append(path)
            return fileio.read_user_file(path, what)

        monkeypatch.setattr(keyfiles, "read_user_file", counted)
        for _ in range(3):
            KeyDir(home).load_trust()
        assert len(reads) == 3

    def test_settled_compares_with_the_newer_of_mtime_and_ctime(self):
        """A file is settled once both its mtime and its ctime are SETTLED_NS old."""
        import time

        from ledger.edges import fileio

        now = time.time_ns()
        old = now - 10 * fileio.SETTLED_NS
        assert fileio.settled((0, 0, 0, old, old))
        assert not fileio.settled((0, 0, 0, old, now))
        assert not fileio.settled((0, 0, 0, now, old))

    def test_by_identity_keeps_settled_files_only_and_a_bounded_number(self):
        """One mechanism for every identity cache: unsettled files are not kept, a
        missing file (None) does not hold a value back, and the bound holds."""
        import time

        from ledger.edges.fileio import ByIdentity

        old = time.time_ns() - 10 * 2_000_000_000
        settled_file = (1, 1, 1, old, old)
        fresh_file = (1, 2, 1, old, time.time_ns())
        cache: ByIdentity[str] = ByIdentity(kept=2)
        cache.keep("fresh", fresh_file)
        assert cache.get(fresh_file) is None
        cache.keep("pair", settled_file, None)
        assert cache.get(settled_file, None) == "pair"
        assert cache.get(settled_file) is None  # another set of files
        cache.keep("one", settled_file)
        assert cache.get(settled_file) == "one"
        third = (1, 3, 1, old, old)
        cache.keep("third", third)  # past the bound of 2: the older values go
        assert cache.get(third) == "third"
        assert cache.get(settled_file) is None
        assert cache.get(settled_file, None) is None

    def test_a_trust_store_rewritten_in_place_is_read_again(self, home):
        """Same inode, same size, new bytes: the store is parsed again (and refused here)."""
        keys = KeyDir(home)
        keys.load_trust()
        data = keys.trust_path.read_bytes()
        with keys.trust_path.open("r+b") as handle:
            handle.write(b"[" + data[1:])  # no longer a trust store, same length
        with pytest.raises(Exception, match="trust store"):
            KeyDir(home).load_trust()

    def test_a_key_file_opened_to_others_is_refused_though_remembered(self, home):
        """The key's mode is checked on every load, before anything remembered is used."""
        keys = KeyDir(home)
        key_id = keys.active_signer(keys.load_trust()).key_id
        keys.private_path(key_id).chmod(0o644)
        with pytest.raises(Exception, match="accessible by others"):
            KeyDir(home).load_signer(key_id)

    def test_a_replaced_state_mac_key_refuses_the_old_state(self, home):
        """The MAC key is read again when its file changes: the old MAC no longer fits."""
        states = StateFile(home / "state", home / "keys" / "state-mac.key")
        states.save_state(None, 0, {"n": 1})
        assert states.load() is not None
        with states.mac_key_path.open("r+b") as handle:
            handle.write(bytes(32))
        with pytest.raises(Exception, match="MAC"):
            StateFile(home / "state", home / "keys" / "state-mac.key").load()

    def test_runtimes_share_a_settled_environment_only_while_it_is_settled(self, home):
        """The resident gate settles a request's environment; otherwise each runtime copies."""
        from ledger import runtime

        settled = {"LEDGER_NOW": "2026-11-22T08:00:00Z"}
        runtime.settle_environ(settled)
        try:
            assert Runtime(home).environ is settled
        finally:
            runtime.settle_environ(None)
        fresh = Runtime(home).environ
        assert fresh is not settled
        assert fresh == dict(os.environ)

    def test_a_value_is_built_once_per_key_and_a_failure_never(self):
        """The same key gets the value built first; a build that raised is tried again."""
        calls: list[int] = []

        def build() -> str:
            calls.append(1)
            if len(calls) == 1:
                raise ValueError("first build fails")
            return "v"

        with pytest.raises(ValueError, match="first build fails"):
            memo.remembered("test-once", 1, build)
        assert memo.remembered("test-once", 1, build) == "v"
        assert memo.remembered("test-once", 1, build) == "v"
        assert len(calls) == 2


class TestKnownHead:
    def test_an_append_by_another_writer_is_seen(self, home):
        """The remembered head is dropped when the file grows."""
        _append(home, 0)
        chain = home / "events.jsonl"
        first = read_head(chain)
        _append(home, 1)
        second = read_head(chain)
        assert first is not None
        assert second is not None
        assert second.size > first.size
        assert second.entry_hash != first.entry_hash

    def test_a_same_size_rewrite_of_the_last_line_is_seen(self, home):
        """Bytes changed in place with the size kept: the head is read again."""
        _append(home, 0)
        _append(home, 1)
        chain = home / "events.jsonl"
        assert read_head(chain) is not None
        data = chain.read_bytes()
        # Same length, no longer an entry: the rewrite must not be trusted.
        last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
        forged = data[: len(data) - len(last) - 1] + b"x" * len(last) + b"\n"
        stat = chain.stat()
        chain.write_bytes(forged)
        os.utime(chain, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime set back too
        with pytest.raises(CorruptTailError):
            read_head(chain)

    def test_a_head_written_here_needs_no_read(self, home, monkeypatch):
        """After our own append, the next transaction's head comes from memory."""
        _append(home, 0)
        from ledger.edges.files import chainfile

        def no_read(*_args: object) -> None:
            raise AssertionError("the last line was read again")

        monkeypatch.setattr(chainfile, "read_last_line", no_read)
        with ChainFile(home / "events.jsonl").transaction() as tx:
            assert tx.head() is not None


class TestParsedCommandLines:
    def test_each_run_gets_its_own_namespace(self, home, monkeypatch, capsys):
        """A remembered parse hands out fresh namespaces."""
        parser = build_parser()
        seen = []
        from ledger.cli.percall import parser as fast

        real = fast._parse

        def spy(parser_: object, args: list[str]) -> object:
            namespace = real(parser_, args)  # type: ignore[arg-type]
            seen.append(namespace)
            return namespace

        monkeypatch.setattr(fast, "_parse", spy)
        monkeypatch.setenv("LEDGER_NOW", NOW["LEDGER_NOW"])
        for _ in range(2):
            assert run_fast(str(home), ["usage"], parser=parser) == 0
        assert seen[0] is not seen[1]
        assert vars(seen[0]) == vars(seen[1])
        capsys.readouterr()

    def test_errors_are_printed_every_time(self, home, capsys):
        """A bad command line is not remembered: it fails with its message each time."""
        parser = build_parser()
        for _ in range(2):
            with pytest.raises(SystemExit) as exited:
                run_fast(str(home), ["verdict", "--no-such-option"], parser=parser)
            assert exited.value.code == 2
            assert "unrecognized arguments" in capsys.readouterr().err


class TestKeptState:
    def _states(self, home: Path) -> StateFile:
        return StateFile(home / "state", home / "keys" / "state-mac.key")

    def test_a_save_stays_in_memory_until_written(self, home):
        """While kept, the file keeps its old bytes and loads see the new state."""
        states = self._states(home)
        states.save_state(None, 0, {"n": 1})
        before = states.path.read_bytes()
        kept = KeptStates()
        with keeping(kept):
            states.save_state(None, 0, {"n": 2})
            assert states.path.read_bytes() == before
            loaded = states.load()
            assert loaded is not None
            assert loaded.data == {"n": 2}
            states.save_state(None, 0, loaded.data)  # a load lends it: saved back
        assert states.path.read_bytes() == before
        kept.write()
        loaded = states.load()
        assert loaded is not None
        assert loaded.data == {"n": 2}

    def test_a_load_lends_the_kept_state_itself_not_a_copy(self, home):
        """No decoding per load: the state saved is the one the next load returns."""
        states = self._states(home)
        kept = KeptStates()
        data = {"n": 1}
        with keeping(kept):
            states.save_state("a" * 64, 10, data)
            loaded = states.load()
        assert loaded is not None
        assert loaded.data is data
        assert (loaded.head_hash, loaded.size) == ("a" * 64, 10)

    def test_a_state_lent_and_never_saved_back_is_dropped(self, home):
        """A job that changed its state and failed before saving: the file is read, not it."""
        states = self._states(home)
        states.save_state("a" * 64, 10, {"n": 1})
        before = states.path.read_bytes()
        kept = KeptStates()
        with keeping(kept):
            states.save_state("b" * 64, 20, {"n": 2})
            lent = states.load()
            assert lent is not None
            lent.data["n"] = 99  # folded an entry, then the job failed: no save
            again = states.load()
        assert again is not None
        assert (again.head_hash, again.data) == ("a" * 64, {"n": 1})
        kept.write()
        assert states.path.read_bytes() == before

    def test_a_state_lent_at_write_time_is_not_written(self, home):
        """The periodic write never writes a state a job may have changed without saving."""
        states = self._states(home)
        states.save_state("a" * 64, 10, {"n": 1})
        before = states.path.read_bytes()
        kept = KeptStates()
        with keeping(kept):
            states.save_state("b" * 64, 20, {"n": 2})
            lent = states.load()
            assert lent is not None
            lent.data["n"] = 99
        kept.write()
        assert states.path.read_bytes() == before

    def test_a_file_written_by_another_process_wins(self, home):
        """Another writer replaced the file: the kept state is dropped, never written over it."""
        states = self._states(home)
        states.save_state(None, 0, {"n": 1})
        kept = KeptStates()
        with keeping(kept):
            states.save_state(None, 0, {"n": 2})
        states.save_state(None, 0, {"n": 3})  # outside: as an in-process writer would
        with keeping(kept):
            loaded = states.load()
            assert loaded is not None
            assert loaded.data == {"n": 3}
        kept.write()
        loaded = states.load()
        assert loaded is not None
        assert loaded.data == {"n": 3}

    def test_a_kept_state_is_not_written_over_a_newer_file(self, home):
        """Written by someone else after the save was kept: the write leaves it."""
        states = self._states(home)
        states.save_state(None, 0, {"n": 1})
        kept = KeptStates()
        with keeping(kept):
            states.save_state(None, 0, {"n": 2})
        states.save_state(None, 0, {"n": 3})
        kept.write()
        loaded = states.load()
        assert loaded is not None
        assert loaded.data == {"n": 3}

    def test_a_relative_home_is_written_where_it_was_meant(self, home, monkeypatch, tmp_path):
        """A request's relative path is kept absolute: the write runs from another directory."""
        monkeypatch.chdir(home.parent)
        states = StateFile(Path(home.name) / "state", Path(home.name) / "keys" / "state-mac.key")
        kept = KeptStates()
        with keeping(kept):
            states.save_state(None, 0, {"n": 3})
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        kept.write()
        assert not (elsewhere / home.name).exists()
        loaded = self._states(home).load()
        assert loaded is not None
        assert loaded.data == {"n": 3}

    def test_a_relative_home_s_key_index_is_written_where_it_was_meant(
        self, home, monkeypatch, tmp_path
    ):
        """Key index appends held in memory go to the request's home, not the writer's directory."""
        monkeypatch.chdir(home.parent)
        states = StateFile(Path(home.name) / "state", Path(home.name) / "keys" / "state-mac.key")
        kept = KeptStates()
        record = {"key": "k:1", "entry": 1, "entry_hash": "ab" * 32, "event_type": "x"}
        with keeping(kept):
            states.load()
            states.save_keys([record])
            states.save_state(None, 0, {"n": 3})
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        kept.write()
        assert not (elsewhere / home.name).exists()
        assert self._states(home).load_key("k:1") is not None

    def test_a_delete_is_kept_too(self, home):
        states = self._states(home)
        states.save_state(None, 0, {"n": 1})
        kept = KeptStates()
        with keeping(kept):
            states.delete()
            assert states.load() is None
            assert states.path.exists()
        kept.write()
        assert not states.path.exists()

    def test_a_state_with_no_file_behind_it_is_written_at_once(self, home, monkeypatch):
        """With no file to compare against, a removal by another process would go
        unseen: such a state is due at once, whatever the interval."""
        from ledger.edges.files import keptstate

        monkeypatch.setattr(keptstate, "WRITE_EVERY_SECONDS", 3600.0)
        self._states(home).delete()
        states = self._states(home)
        kept = KeptStates()
        with keeping(kept):
            states.save_state(None, 0, {"n": 1})
        assert kept.due()
        kept.write()
        assert states.path.exists()
        with keeping(kept):
            states.save_state(None, 0, {"n": 2})
        assert not kept.due()  # now a file stands behind it

    def test_writes_are_spaced_and_forget_drops_everything(self, home, monkeypatch):
        """Due only after the interval; a forgotten state is never written."""
        from ledger.edges.files import keptstate

        states = self._states(home)
        states.save_state(None, 0, {"n": 0})
        kept = KeptStates()
        assert not kept.due()  # nothing kept
        with keeping(kept):
            states.save_state(None, 0, {"n": 1})
        monkeypatch.setattr(keptstate, "WRITE_EVERY_SECONDS", 3600.0)
        assert not kept.due()
        monkeypatch.setattr(keptstate, "WRITE_EVERY_SECONDS", 0.0)
        assert kept.due()
        kept.forget()
        assert not kept.due()
        kept.write()
        loaded = states.load()
        assert loaded is not None
        assert loaded.data == {"n": 0}

    def test_hooks_run_after_the_groups_fsync_and_not_on_failure(self, home, monkeypatch):
        """The after-commit hook runs only once the group is durable."""
        _append(home, 0)
        chain = ChainFile(home / "events.jsonl")
        order: list[str] = []
        with group_commit(chain) as group:
            _append(home, 1)
            group.after_commit.append(lambda: order.append("after"))
            real = os.fsync

            def spied(fd: int) -> None:
                order.append("fsync")
                real(fd)

            monkeypatch.setattr(os, "fsync", spied)
        assert order == ["fsync", "after"]

        def failing(_fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        ran: list[str] = []
        with pytest.raises(GroupCommitError):  # noqa: PT012
            with group_commit(chain) as group:
                _append(home, 2)
                group.after_commit.append(lambda: ran.append("after"))
                monkeypatch.setattr(os, "fsync", failing)
        assert ran == []
