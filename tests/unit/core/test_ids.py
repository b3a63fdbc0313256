"""Caller-picked ids: checked once where they enter, escaped where they are shown."""

import pytest

from ledger.core.alerts import alert_for_entry
from ledger.core.ids import MAX_ID_CHARS, checked_id, for_chat, printable
from ledger.errors import EXIT_USAGE, UsageError


@pytest.mark.parametrize("value", ["run-42", "session_1f0e", "a" * MAX_ID_CHARS, "équipe nord"])
def test_printable_ids_up_to_128_characters_pass(value):
    assert checked_id(value, "--cycle-id") == value


@pytest.mark.parametrize(
    "value", ["", "a" * (MAX_ID_CHARS + 1), "x\x1b[31m", "tab\there", "line\u2028", "z\u200bw", 7]
)
def test_other_ids_are_a_usage_error_naming_where_they_came_from(value):
    with pytest.raises(UsageError, match=r"^x-ledger-session: ") as caught:
        checked_id(value, "x-ledger-session")
    assert caught.value.exit_code == EXIT_USAGE


def test_printable_escapes_control_codes_for_a_terminal():
    assert printable("ok") == "ok"
    assert printable("a\x1b[2Jb\u2028") == "a\\x1b[2Jb\\u2028"


def test_for_chat_neutralises_mentions_and_links():
    shown = for_chat("<!channel> see <https://evil.example|your bill> & `x`")
    assert "<" not in shown
    assert ">" not in shown
    assert shown == "`&lt;!channel&gt; see &lt;https://evil.example|your bill&gt; &amp; 'x'`"


def test_an_alert_shows_a_per_session_scope_and_agent_inertly():
    """A chain written before ids were checked may hold anything: the alert text is inert."""
    payload = {
        "deciding_cap": "budget:per-run[<!channel> https://evil.example]",
        "agent": "<!here>",
        "usd_used_micros": 1,
        "usd_reserved_micros": 0,
        "cap_micros": 1,
        "utc_day": "2026-06-01",
    }
    alert = alert_for_entry("budget.halt_100", payload, "ab" * 32, "2026-06-01T12:00:00Z")
    assert alert is not None
    assert "<!" not in alert.text
    assert "`&lt;!channel&gt; https://evil.example`" in alert.text
    assert "agent `&lt;!here&gt;`" in alert.text
