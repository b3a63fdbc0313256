"""report --format html over a range: each line drawn against its own cap or budget."""

from pathlib import Path

NOW = {"LEDGER_NOW": "2026-03-10T00:00:00Z"}
BUDGET = """
[[budgets]]
name = "tiny"
usd = 1
period = "month"
match = { agent = "coder" }
"""


def test_each_line_is_a_share_of_its_own_cap(home: Path, run_inproc):
    (home / "ledger.toml").write_text((home / "ledger.toml").read_text() + BUDGET)
    for day, usd, agent in (("02", "0.5", "coder"), ("03", "0.25", "coder"), ("03", "25", "x")):
        result = run_inproc(["--home", str(home), "record", usd, "--provider", "openai",
                             "--agent", agent], {"LEDGER_NOW": f"2026-03-{day}T12:00:00Z"})  # fmt: skip
        assert result.code == 0, result.stderr
    page = run_inproc(
        ["--home", str(home), "report", "--month", "2026-03", "--format", "html"], NOW
    )
    assert page.code == 0, page.stderr
    assert page.stdout.startswith("<!DOCTYPE html>")
    assert "<svg" in page.stdout
    assert 'href="http' not in page.stdout  # nothing fetched from the network
    assert "src=" not in page.stdout

    from ledger.cli.operator.report_range import page_scopes
    from ledger.integrations.report_range_chart import scope_lines
    from ledger.runtime import build_runtime

    runtime = build_runtime(str(home))
    doc = {"from": "2026-03-01", "to": "2026-03-31", **page_scopes(runtime, "2026-03-01",
                                                                  "2026-03-31", None)}  # fmt: skip
    lines = dict(scope_lines(doc, runtime.config))
    daily = lines["daily cap $100.00"]
    tiny = lines["budget tiny (month) $1.00"]
    # The $1 budget reads 50 % then 75 % of itself; the $100 cap 0.5 % then 25.25 %.
    assert (tiny[1], tiny[2], tiny[30]) == (50.0, 75.0, 75.0)
    assert (daily[1], daily[2], daily[3]) == (0.5, 25.25, 0.0)
