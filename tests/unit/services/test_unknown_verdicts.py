"""A verdict text this release does not know never admits, wherever a document is read.

The gate itself only writes the four verdicts, so each door is handed a document
with another text (``admit``, as a newer or foreign writer might spell one) by
replacing the gate's ``calls.verdict``; everything after it runs for real.
"""

import json
from pathlib import Path
from typing import Any

import pytest

import ledger
from ledger.api import Verdict as ApiVerdict
from ledger.core.halt_text import halt_message
from ledger.core.hook_protocol import HookInput
from ledger.core.verdict_kind import Verdict
from ledger.providers import estimate_request, route
from ledger.runtime import Runtime
from ledger.services.agents.session_gate import session_verdict
from ledger.services.gate import calls
from ledger.services.gate.request_verdict import request_verdict
from tests.gate_helpers import env_at

UNKNOWN = "admit"
DOCUMENT: dict[str, Any] = {
    "verdict": UNKNOWN, "verdict_ref": "ab" * 32, "deciding_cap": "aggregate",
    "usd_used_micros": 1_000_000, "usd_reserved_micros": 0, "daily_cap_micros": 100_000_000,
    "estimated_micros": 10_000, "usage_pct": 1.01, "uncertainty_reason": None,
    "diagnostic": None, "utc_day": "2026-11-22", "budget_day": "2026-11-22",
}  # fmt: skip


@pytest.fixture
def unknown_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate answers every verdict with an unknown text (and says it admits)."""

    def verdict(*_args: Any, **_kwargs: Any) -> tuple[dict[str, Any], bool]:
        return dict(DOCUMENT), True

    monkeypatch.setattr(calls, "verdict", verdict)


@pytest.fixture
def runtime(home: Path, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    for key, value in env_at().items():
        monkeypatch.setenv(key, value)
    return Runtime(home)


def _request() -> Any:
    found = route("POST", "/v1/messages")
    assert found is not None
    body = {"model": "claude-sonnet-4-6", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    return estimate_request(found, json.dumps(body).encode())


def test_the_python_apis_verdict_is_not_allowed():
    """``Verdict.allowed`` is false even with a ref: the text reads as halt-uncertainty."""
    answer = ApiVerdict(DOCUMENT)
    assert answer.kind is Verdict.HALT_UNCERTAINTY
    assert answer.allowed is False
    assert answer.verdict == UNKNOWN  # the document itself is kept as it came


def test_the_halt_sentence_shows_the_text_and_reads_it_as_a_halt():
    """No ``projected % of the cap`` wording: that belongs to halt-100 only."""
    assert halt_message(DOCUMENT).startswith("admit: the deciding cap aggregate of $100.00")
    assert str(ledger.BudgetHalted(ApiVerdict(DOCUMENT))).startswith("admit: ")


@pytest.mark.usefixtures("unknown_verdicts")
def test_a_request_verdict_halts(runtime):
    """The gateway's and the SDK guard's door: typed as a halt, and the API does not allow it."""
    decided = request_verdict(runtime, _request())
    assert decided.verdict is Verdict.HALT_UNCERTAINTY
    assert decided.verdict.halts
    answer = ledger.open(home=runtime.home).verdict_request(_request())
    assert answer.allowed is False


@pytest.mark.usefixtures("unknown_verdicts")
def test_the_python_guard_raises_budget_halted(runtime):
    book = ledger.open(home=runtime.home)
    with pytest.raises(ledger.BudgetHalted) as caught:
        with book.guard(provider="anthropic", estimate_usd="0.01"):
            pytest.fail("the guarded block ran on an unknown verdict")
    assert caught.value.verdict.kind is Verdict.HALT_UNCERTAINTY


@pytest.mark.usefixtures("unknown_verdicts")
def test_a_claude_code_session_is_denied_and_halted(runtime):
    """The hooks' door: the tool call is denied and the session stops (fail-closed)."""
    hook = HookInput("PreToolUse", "Bash", "s1", None, None, {})
    answer = session_verdict(runtime, hook, None)
    assert answer.halted is True
    assert answer.deny is not None
    assert answer.deny.startswith("ledger: USD budget halt-uncertainty")
    assert "tool call refused (fail-closed" in answer.deny
