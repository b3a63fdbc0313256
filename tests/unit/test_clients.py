"""The ``client`` dimension: which program a User-Agent names."""

import pytest

from ledger.core.clients import OTHER, client_of


@pytest.mark.parametrize(
    ("user_agent", "client"),
    [
        ("claude-cli/2.1.197 (external, cli)", "claude-code"),
        ("codex_cli_rs/0.46.0 (Debian 12; x86_64) xterm", "codex"),
        ("GeminiCLI/0.9.0 (linux; x64)", "gemini-cli"),
        ("Anthropic/Python 0.69.0", "anthropic-sdk-python"),
        ("OpenAI/Python 2.3.0", "openai-python"),
        ("OpenAI/JS 5.0.0", "openai-node"),
        ("curl/7.88.1", "curl"),
        ("Mozilla/5.0", OTHER),
        ("", OTHER),
        (None, OTHER),
    ],
)
def test_client_of_user_agent(user_agent, client):
    """Each known client's User-Agent names it; anything else is `other`."""
    assert client_of(user_agent) == client


def test_a_budget_may_match_on_the_client():
    """`match = { client = "codex" }` applies to Codex's calls only."""
    from ledger.core.budgets import CallScope, budget_index, parse_budgets

    budgets = parse_budgets(
        [{"name": "codex-only", "usd": 1, "period": "day", "match": {"client": "codex"}}], "budgets"
    )
    index = budget_index(budgets)
    assert [a.budget.name for a in index.applicable(CallScope(client="codex"))] == ["codex-only"]
    assert index.applicable(CallScope(client="claude-code")) == ()
    assert index.applicable(CallScope()) == ()
    sealed = CallScope.from_payload({"client": "codex", "provider": "openai"})
    assert sealed.client == "codex"
