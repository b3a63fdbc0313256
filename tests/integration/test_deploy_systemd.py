"""``ledger deploy systemd``: the shipped units, rendered for this launcher and home."""

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, clean_env, run_process

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def render(home: Path, output: Path, *extra: str):
    result = run_process(
        ["--home", str(home), "deploy", "systemd", "--output", str(output), *extra]
    )
    assert result.code == 0, result.stderr
    return result.json()


def settings(path: Path, key: str) -> list[str]:
    return [
        line.split("=", 1)[1]
        for line in path.read_text().splitlines()
        if line.startswith(f"{key}=")
    ]


def test_system_units_name_this_launcher_and_the_absolute_home(home: Path, tmp_path: Path):
    """ExecStart runs this installation's ledger on the home given; Documentation= exists."""
    document = render(home, tmp_path / "units")
    daemon = tmp_path / "units" / "ledger-daemon.service"
    assert str(daemon) in document["files"]
    assert "ledger-serve.service" not in " ".join(document["files"])  # the daemon serves
    (exec_start,) = settings(daemon, "ExecStart")
    launcher, _, rest = exec_start.partition(" ")
    assert Path(launcher).is_absolute()
    assert os.access(launcher, os.X_OK)
    assert rest == f"--home {home.absolute()} daemon"
    assert settings(daemon, "ReadWritePaths") == [str(home.absolute())]
    for unit in (tmp_path / "units").glob("*.service"):
        for link in settings(unit, "Documentation"):
            assert Path(link.removeprefix("file://")).is_file(), link
        assert "/usr/local/bin/ledger" not in unit.read_text()
        assert "/var/lib/ledger" not in unit.read_text()
    assert settings(daemon, "StateDirectory") == []  # it would make /var/lib/ledger


def test_user_units_have_no_system_only_settings(home: Path, tmp_path: Path):
    """--user: no User=, no privileged sandboxing, default.target, and the serve unit too."""
    render(home, tmp_path / "units", "--user")
    daemon = tmp_path / "units" / "ledger-daemon.service"
    assert settings(daemon, "User") == []
    assert settings(daemon, "CapabilityBoundingSet") == []
    assert settings(daemon, "WantedBy") == ["default.target"]
    serve = tmp_path / "units" / "ledger-serve.service"
    assert settings(serve, "ExecStart")[0].endswith(f"--home {home.absolute()} serve")


def test_a_missing_home_renders_nothing(tmp_path: Path):
    """The units need an initialized home: exit 78 and no folder written."""
    result = run_process(
        ["--home", str(tmp_path / "nope"), "deploy", "systemd", "--output", str(tmp_path / "u")]
    )
    assert result.code == 78
    assert not (tmp_path / "u").exists()


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("user", [False, True], ids=["system", "user"])
def test_rendered_units_pass_systemd_analyze_verify(home: Path, tmp_path: Path, user: bool):
    """systemd's own checker accepts every rendered unit (timers find their services)."""
    output = tmp_path / "units"
    files = render(home, output, *(["--user"] if user else []))["files"]
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    command = [str(SYSTEMD_ANALYZE), *(["--user"] if user else []), "verify", *files]
    proc = subprocess.run(
        command,
        env=clean_env(XDG_RUNTIME_DIR=str(runtime)),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(json.dumps(files))


def test_the_shipped_units_are_what_is_rendered():
    """Every file in deploy/systemd is rendered (none is left behind by a name filter)."""
    shipped = {path.name for path in (REPO / "deploy" / "systemd").iterdir()}
    from ledger.edges.deployfiles import unit_sources

    assert set(unit_sources()) == shipped


def test_user_units_say_how_to_install_them_as_a_user(home: Path, tmp_path: Path):
    """--user: the comments give user-mode steps; nothing about useradd or /etc/systemd/system."""
    render(home, tmp_path / "units", "--user")
    for unit in (tmp_path / "units").iterdir():
        text = unit.read_text()
        for system_only in ("useradd", "/etc/systemd/system", "sudo ", "systemctl daemon-reload"):
            assert system_only not in text, (unit.name, system_only)
    daemon = (tmp_path / "units" / "ledger-daemon.service").read_text()
    assert "#   systemctl --user daemon-reload && systemctl --user enable --now ledger-daemon" in (
        daemon
    )
    timer = (tmp_path / "units" / "ledger-poll.timer").read_text()
    assert "systemctl --user enable --now ledger-poll.timer" in timer


def _install_steps(document: dict[str, Any], env: dict[str, str]) -> None:
    """Run the printed steps a test can run (files only: no systemd manager here)."""
    for step in document["install"]:
        if step.startswith(("systemctl", "loginctl")):
            continue
        proc = subprocess.run(
            ["/bin/sh", "-c", step], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, (step, proc.stderr)


@pytest.mark.parametrize("into_the_unit_dir", [True, False], ids=["unit-dir", "elsewhere"])
def test_user_install_steps_work_with_the_output_in_the_user_unit_dir(
    home: Path, tmp_path: Path, into_the_unit_dir: bool
):
    """With --output the user unit folder the docs recommend, the printed steps still work."""
    config = tmp_path / "config"
    env = clean_env(HOME=str(tmp_path), XDG_CONFIG_HOME=str(config))
    unit_dir = config / "systemd" / "user"
    output = unit_dir if into_the_unit_dir else tmp_path / "units"
    result = run_process(
        ["--home", str(home), "deploy", "systemd", "--user", "--output", str(output)], env=env
    )
    assert result.code == 0, result.stderr
    document = result.json()
    assert not any("/etc/" in step for step in document["install"])
    assert "systemctl --user enable --now ledger-daemon.service" in document["install"]
    _install_steps(document, env)
    assert (unit_dir / "ledger-daemon.service").is_file()


def test_the_user_metrics_unit_writes_under_the_home(home: Path, tmp_path: Path):
    """The metrics unit's ExecStart, run as is, writes ledger.prom in the home."""
    render(home, tmp_path / "units", "--user")
    metrics = tmp_path / "units" / "ledger-metrics.service"
    (exec_start,) = settings(metrics, "ExecStart")
    assert exec_start.endswith(f"--output {home.absolute()}/ledger.prom")
    proc = subprocess.run(exec_start.split(" "), env=clean_env(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "ledger_" in (home / "ledger.prom").read_text()
