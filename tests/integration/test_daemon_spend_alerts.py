"""`warn` alerts follow used spend, not a verdict's projection; several thresholds, in order.

A real daemon process and a real local webhook; spend is recorded with real
`ledger record` processes on the real clock (the daemon runs on no other).
"""

import json
from pathlib import Path

from tests.conftest import run_process
from tests.integration.test_daemon_alerts import alert_env, daemon, webhook


def _record(home: Path, env: dict[str, str], usd: str) -> None:
    result = run_process(["--home", str(home), "record", usd, "--provider", "openai"], env)
    assert result.code == 0, result.stderr


def test_a_projected_warning_alerts_nothing_until_the_spend_is_used(home: Path):
    with webhook() as hook:
        env = alert_env(hook.url, on=["warn"])
        _record(home, env, "8.5")
        # Projected 95 % (warn-90), but the call then costs $0.10: 86 % used.
        verdict = run_process(["--home", str(home), "verdict", "1"], env).json()
        assert verdict["verdict"] == "warn-90"
        settle = ["record", "0.1", "--provider", "openai", "--verdict-ref", verdict["verdict_ref"]]
        assert run_process(["--home", str(home), *settle], env).code == 0
        with daemon(home, env) as lines:
            assert lines.wait_for("started")
            assert not hook.wait_for(1, timeout=3)
            _record(home, env, "0.5")  # 91 % used: now it warns
            bodies = hook.wait_for(1)
            assert lines.wait_for("alert sent")
        assert [(b["event"], b["scope"]) for b in bodies] == [("warn", "aggregate")]
        assert "reached 90% of the cap for aggregate" in str(bodies[0]["text"])
        assert "$9.10 used + $0.00 reserved of cap $10.00" in str(bodies[0]["text"])


def test_each_of_a_budgets_thresholds_alerts_once_and_in_order(home: Path):
    with webhook() as hook:
        env = alert_env(hook.url, on=["warn", "halt"])
        env["LEDGER_BUDGETS"] = json.dumps(
            [{"name": "team", "usd": 4, "period": "day", "alert_pcts": [50, 80, 100]}]
        )
        _record(home, env, "3.4")  # 85 % of the budget: 50 % and 80 % crossed at once
        with daemon(home, env) as lines:
            assert lines.wait_for("started")
            bodies = hook.wait_for(2)
            assert lines.wait_for("alert sent", count=2)
            assert len(hook.wait_for(3, timeout=3)) == 2  # each threshold once
            _record(home, env, "0.6")  # 100 %
            bodies = hook.wait_for(3)
        texts = [str(body["text"]) for body in bodies]
        assert [body["scope"] for body in bodies] == ["budget:team"] * 3
        assert ["50%" in texts[0], "80%" in texts[1], "100%" in texts[2]] == [True] * 3
        assert len(hook.bodies) == 3
