"""A home without a billing observer (`init --billing none`) runs no reconcile job."""

from pathlib import Path

from tests.conftest import clean_env, run_process
from tests.integration.test_daemon_poll import daemon


def test_a_home_without_an_observer_runs_no_reconcile_job(tmp_path: Path):
    home = tmp_path / "home"
    init = ["--home", str(home), "init", "--daily-cap-usd", "5", "--billing", "none"]
    assert run_process(init, clean_env()).code == 0
    with daemon(home, clean_env(), "--no-serve") as lines:
        assert lines.wait_for("started:")
        started = next(line for line in lines.lines if "started:" in line)
        assert "reconcile off (no observer.command)" in started
        assert not lines.wait_for("reconcile aggregate", timeout=2)
    assert not any("reconcile" in line and "unreachable" in line for line in lines.lines)
    report = run_process(["--home", str(home), "report"], clean_env())
    assert "billing unreachable" not in report.stdout
