"""Ids are escaped where shown: metrics labels (by prometheus-client), status and report."""

from types import SimpleNamespace

import pytest

prometheus_client = pytest.importorskip("prometheus_client")


def test_a_per_value_with_quotes_and_a_line_break_stays_one_escaped_label():
    from ledger.cli.operator.metrics_command import _budget_gauges

    registry = prometheus_client.CollectorRegistry()
    hostile = 'x"} 1\nledger_fake{a="b'
    row = {"name": "per-run", "per_value": hostile, "used_micros": 1, "reserved_micros": 0,
           "cap_micros": 2, "usage_pct": 50.0}  # fmt: skip
    _budget_gauges(SimpleNamespace(budgets=[row]), registry)  # type: ignore[arg-type]
    text = prometheus_client.generate_latest(registry).decode()
    assert "\nledger_fake" not in text
    assert 'per="x\\"} 1\\nledger_fake{a=\\"b"' in text


def test_status_and_report_tables_escape_control_codes():
    from ledger.cli.operator import report_range, status_command

    rows = [["SCOPE", "NOTE"], ["budget:per-run[\x1b[2Jgone]", "ok"]]
    for table in (status_command._table, report_range.table_lines):
        text = "\n".join(table(rows))
        assert "\x1b" not in text
        assert "budget:per-run[\\x1b[2Jgone]" in text
