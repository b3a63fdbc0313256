"""The session of an Anthropic request: Claude Code's session part of metadata.user_id."""

import json

import pytest

from ledger.providers.session import session_from_user_id

SESSION = "4f1c2a8e-93b0-4c57-9d1e-2b7a6f0e5c31"


@pytest.mark.parametrize(
    ("user_id", "session"),
    [
        (json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": SESSION}), SESSION),
        (f"user_{'ab12' * 16}_account_{SESSION[::-1]}_session_{SESSION}", SESSION),
        (f"user_{'ab12' * 16}_account__session_{SESSION}", SESSION),
        (json.dumps({"device_id": "d" * 64, "account_uuid": ""}), None),
        ("session-7", "session-7"),
        ("{not json", "{not json"),
        ("", None),
        (None, None),
    ],
)
def test_the_session_part_is_taken_when_present(user_id, session):
    """The JSON form's session_id, the older form's uuid after _session_, else the value itself."""
    assert session_from_user_id(user_id) == session
