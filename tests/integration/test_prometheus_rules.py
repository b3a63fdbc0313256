"""deploy/prometheus/ledger-alerts.yml: well-formed, and every metric it names is one we write."""

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "ledger-alerts.yml"
METRICS_SOURCE = (
    Path(__file__).resolve().parents[2] / "ledger" / "cli" / "operator" / "metrics_command.py"
)


def test_rules_parse_and_name_only_metrics_that_exist():
    document = yaml.safe_load(RULES.read_text())
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    assert len(rules) >= 5
    written = set(re.findall(r'"(ledger_[a-z_]+)"', METRICS_SOURCE.read_text()))
    written |= {f"ledger_{name}" for name in ("used_usd", "reserved_usd", "cap_usd", "usage_pct")}
    for rule in rules:
        assert set(rule) >= {"alert", "expr", "annotations"}
        for name in re.findall(r"\bledger_[a-z_]+", rule["expr"]):
            assert name in written, (rule["alert"], name)
