"""Gateway keys: only a digest is kept; unknown, revoked and expired keys are refused."""

import datetime as dt

import pytest

from ledger.core.gateway_keys import (
    digest_of,
    keys_document,
    keys_from_document,
    new_key,
    resolve,
    revoked,
)
from ledger.errors import GatewayKeyError, InputDataError, UsageError

NOW = dt.datetime(2026, 11, 26, 10, 0, tzinfo=dt.UTC)
SECRET = "lk_" + "A" * 43
OTHER = "lk_" + "B" * 43


def issued(**changes):
    key = new_key([], "ci", SECRET, "ci-bot", ["t", "t"], None, NOW)
    return [key._replace(**changes)]


class TestIssue:
    def test_only_the_digest_is_kept(self):
        """The key file never holds the secret."""
        keys = issued()
        assert keys[0].digest == digest_of(SECRET)
        assert SECRET not in str(keys_document(keys))
        assert keys_from_document(keys_document(keys), "f") == keys
        assert keys[0].tags == ("t",)

    def test_names_are_never_reused_and_expiry_is_in_the_future(self):
        """A name issued before (even revoked) and a past expiry are refused."""
        keys = revoked(issued(), "ci", NOW)
        with pytest.raises(UsageError, match="already issued"):
            new_key(keys, "ci", OTHER, None, [], None, NOW)
        with pytest.raises(UsageError, match="in the future"):
            new_key([], "x", OTHER, None, [], NOW, NOW)
        with pytest.raises(UsageError, match="must match"):
            new_key([], "Bad Name", OTHER, None, [], None, NOW)

    def test_a_key_file_of_another_shape_is_refused(self):
        """A damaged key file is bad input data, never an empty list."""
        with pytest.raises(InputDataError):
            keys_from_document({"format": "other", "keys": []}, "f")


class TestResolve:
    def test_an_active_key_resolves_to_its_scope(self):
        """The presented secret gives its name, agent and tags."""
        key = resolve(issued(), SECRET, NOW)
        assert (key.name, key.agent, key.tags) == ("ci", "ci-bot", ("t",))

    @pytest.mark.parametrize(
        ("keys", "secret", "why"),
        [
            (issued(), OTHER, "unknown gateway key"),
            (issued(), "sk-ant-123", "not a gateway key"),
            (issued(revoked_at="2026-11-26T09:00:00.000000Z"), SECRET, "'ci' is revoked"),
            (issued(expires="2026-11-26T10:00:00.000000Z"), SECRET, "'ci' is expired"),
        ],
    )
    def test_unknown_revoked_and_expired_keys_are_refused(self, keys, secret, why):
        """Each refusal says why, and never repeats the secret."""
        with pytest.raises(GatewayKeyError, match=why) as caught:
            resolve(keys, secret, NOW)
        assert secret not in str(caught.value)


def test_a_key_issued_without_an_agent_is_its_names_agent():
    """New keys store their name as agent; one kept without an agent is shown and bound so."""
    import datetime as dt

    from ledger.core.gateway_keys import new_key

    now = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    issued = new_key([], "ci", "lk_" + "a" * 43, None, (), None, now)
    assert (issued.agent, issued.sealed()["agent"]) == ("ci", "ci")
    kept = issued._replace(agent=None)
    assert (kept.bound_agent, kept.shown(now)["agent"]) == ("ci", "ci")
