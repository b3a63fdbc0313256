"""run_observer against real fake observer processes (tests/observers/fake_observer.py)."""

import datetime as dt
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from ledger.core.observation import Deferred, Reading, Unreachable
from ledger.edges.clock import FixedClock
from ledger.edges.observer import observer_environment, run_observer

FAKE = Path(__file__).resolve().parent.parent / "observers" / "fake_observer.py"
NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
CLOCK = FixedClock(NOW)


def run(mode: str, timeout: int = 10, provider: str = "aggregate"):
    return run_observer((str(FAKE), mode), provider, timeout, CLOCK)


def test_ok_reading():
    result = run("ok")
    assert result == Reading(
        "aggregate",
        12_345_678,
        dt.datetime(2026, 3, 1, 11, 58, tzinfo=dt.UTC),
        None,
        NOW,
    )


def test_ok_reading_through_an_interpreter_argv():
    result = run_observer((sys.executable, str(FAKE), "ok"), "openai", 10, CLOCK)
    assert isinstance(result, Reading)
    assert result.provider == "openai"
    assert result.fetched_at == NOW


def test_ok_with_server_ts():
    result = run("ok_server_ts")
    assert isinstance(result, Reading)
    assert result.usd_used_micros == 100_000
    assert result.server_ts == dt.datetime(2026, 3, 1, 12, 0, 5, tzinfo=dt.UTC)


def test_unreachable():
    assert run("unreachable") == Unreachable("aggregate", "billing API down", NOW)


def test_defer():
    assert run("defer") == Deferred("aggregate", "rate_limited", NOW)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is dead for our purposes
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_timeout_kills_the_whole_process_group(tmp_path, monkeypatch):
    pidfile = tmp_path / "pids"
    monkeypatch.setenv("LEDGER_OBSERVER_PIDFILE", str(pidfile))
    start = time.monotonic()
    result = run("sleep", timeout=1)
    elapsed = time.monotonic() - start
    assert result == Unreachable("aggregate", "observer timed out after 1 s", NOW)
    assert elapsed < 2.5
    observer_pid, child_pid = (int(p) for p in pidfile.read_text().split())
    deadline = time.monotonic() + 2
    while (_alive(observer_pid) or _alive(child_pid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(observer_pid)
    assert not _alive(child_pid)


def test_timeout_after_stdout_closed():
    start = time.monotonic()
    result = run("silent_hang", timeout=1)
    assert time.monotonic() - start < 2.5
    assert result == Unreachable("aggregate", "observer timed out after 1 s", NOW)


def test_ten_megabytes_of_output_is_unreachable_and_not_buffered():
    tracemalloc.start()
    try:
        result = run("flood")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result == Unreachable("aggregate", "output over 64 KiB", NOW)
    assert peak < 1_000_000


def test_large_stderr_is_discarded():
    result = run("stderr_flood")
    assert isinstance(result, Reading)


def test_nonzero_exit():
    assert run("exit3") == Unreachable("aggregate", "observer exited with status 3", NOW)


@pytest.mark.parametrize(
    ("mode", "reason_part"),
    [
        ("nan", "non-finite number NaN"),
        ("negative", "usd_used is negative"),
        ("missing", "missing field billing_ts"),
        ("wrong_types", "usd_used must be a number, got string"),
        ("invalid_json", "invalid JSON"),
        ("empty", "observer printed nothing"),
    ],
)
def test_malformed_output_is_unreachable(mode, reason_part):
    result = run(mode)
    assert isinstance(result, Unreachable)
    assert reason_part in result.reason
    assert result.fetched_at == NOW


def test_not_executable(tmp_path):
    script = tmp_path / "obs.py"
    script.write_text('#!/usr/bin/env python3\nprint("{}")\n')
    script.chmod(0o644)
    result = run_observer((str(script),), "aggregate", 5, CLOCK)
    assert isinstance(result, Unreachable)
    assert "not executable" in result.reason


def test_missing_file(tmp_path):
    result = run_observer((str(tmp_path / "nope"),), "aggregate", 5, CLOCK)
    assert isinstance(result, Unreachable)
    assert result.reason.startswith("observer not found")


def test_empty_command():
    result = run_observer((), "aggregate", 5, CLOCK)
    assert isinstance(result, Unreachable)


def test_stdin_is_devnull():
    result = run("stdin")
    assert isinstance(result, Reading)
    assert result.usd_used_micros == 0


def test_environment_is_minimal_and_provider_is_appended(tmp_path, monkeypatch):
    envfile = tmp_path / "env.json"
    monkeypatch.setenv("LEDGER_OBSERVER_ENVFILE", str(envfile))
    monkeypatch.setenv("ANTHROPIC_ADMIN_KEY", "sk-ant-admin-test")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:1")
    monkeypatch.setenv("SOME_ADMIN_KEY", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
    monkeypatch.setenv("LEDGER_HOME", "/nowhere")
    result = run("env", provider="anthropic")
    assert isinstance(result, Reading)
    seen = json.loads(envfile.read_text())
    assert seen["argv"][1:] == ["env", "anthropic"]
    env = seen["env"]
    assert env["ANTHROPIC_ADMIN_KEY"] == "sk-ant-admin-test"
    assert env["OPENAI_API_BASE"] == "http://127.0.0.1:1"
    assert env["SOME_ADMIN_KEY"] == "k"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert "LEDGER_HOME" not in env


def test_observer_environment_filter():
    env = observer_environment(
        {
            "PATH": "/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
            "LC_ALL": "C",
            "OPENAI_ADMIN_KEY": "a",
            "X_ADMIN_KEY": "b",
            "ADMIN_KEY_X": "c",
            "LEDGER_OBSERVER_FILE": "/f",
            "LEDGER_NOW": "2026-01-01T00:00:00Z",
            "ANTHROPIC_API_BASE": "http://127.0.0.1",
        }
    )
    assert env == {
        "PATH": "/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "OPENAI_ADMIN_KEY": "a",
        "X_ADMIN_KEY": "b",
        "LEDGER_OBSERVER_FILE": "/f",
        "ANTHROPIC_API_BASE": "http://127.0.0.1",
    }


def test_bad_provider_is_a_caller_error():
    with pytest.raises(ValueError, match="provider"):
        run_observer((str(FAKE), "ok"), "Bad Provider", 5, CLOCK)


FILE_OBSERVER = Path(__file__).resolve().parents[2] / "observers" / "file_observer.py"
BTS = '"billing_ts": "2026-03-01T11:00:00Z"'


def file_run(monkeypatch, path, provider="aggregate", via_arg=False):
    command: tuple[str, ...]
    if via_arg:
        monkeypatch.delenv("LEDGER_OBSERVER_FILE", raising=False)
        command = (str(FILE_OBSERVER), "--file", str(path))
    else:
        monkeypatch.setenv("LEDGER_OBSERVER_FILE", str(path))
        command = (str(FILE_OBSERVER),)
    return run_observer(command, provider, 10, CLOCK)


def test_file_observer_single_object(tmp_path, monkeypatch):
    path = tmp_path / "obs.json"
    path.write_text(f'{{"usd_used": 4.25, {BTS}, "server_ts": "2026-03-01T12:00:01Z"}}\n')
    for provider in ("aggregate", "openai"):
        result = file_run(monkeypatch, path, provider)
        assert isinstance(result, Reading)
        assert result.provider == provider
        assert result.usd_used_micros == 4_250_000
        assert result.server_ts == dt.datetime(2026, 3, 1, 12, 0, 1, tzinfo=dt.UTC)


def test_file_observer_mapping_with_aggregate_fallback(tmp_path, monkeypatch):
    path = tmp_path / "obs.json"
    path.write_text(
        f'{{"openai": {{"usd_used": 1.0000000000000000001, {BTS}}},'
        f' "aggregate": {{"usd_used": 9, {BTS}}},'
        ' "anthropic": {"_defer": true, "_reason": "rate_limited"}}'
    )
    openai = file_run(monkeypatch, path, "openai")
    assert isinstance(openai, Reading)
    assert openai.usd_used_micros == 1_000_001  # digits copied exactly, rounded up
    assert file_run(monkeypatch, path, "anthropic") == Deferred("anthropic", "rate_limited", NOW)
    other = file_run(monkeypatch, path, "mistral", via_arg=True)
    assert isinstance(other, Reading)
    assert other.usd_used_micros == 9_000_000


def test_file_observer_mapping_without_entry(tmp_path, monkeypatch):
    path = tmp_path / "obs.json"
    path.write_text(f'{{"openai": {{"usd_used": 1, {BTS}}}}}')
    result = file_run(monkeypatch, path, "anthropic")
    assert isinstance(result, Unreachable)
    assert "no object for anthropic" in result.reason


@pytest.mark.parametrize(
    ("content", "reason_part"),
    [
        (None, "file not found"),
        ("{not json", "file is not valid JSON"),
        ("[1, 2]", "does not hold a JSON object"),
        (f'{{"usd_used": NaN, {BTS}}}', "non-finite number NaN"),
        ('{"aggregate": {"usd_used": -2, ' + BTS + "}}", "usd_used is negative"),
    ],
)
def test_file_observer_bad_file(tmp_path, monkeypatch, content, reason_part):
    path = tmp_path / "obs.json"
    if content is not None:
        path.write_text(content)
    result = file_run(monkeypatch, path)
    assert isinstance(result, Unreachable)
    assert reason_part in result.reason


def test_file_observer_without_a_file(monkeypatch):
    monkeypatch.delenv("LEDGER_OBSERVER_FILE", raising=False)
    result = run_observer((str(FILE_OBSERVER),), "aggregate", 10, CLOCK)
    assert isinstance(result, Unreachable)
    assert "LEDGER_OBSERVER_FILE" in result.reason


def test_shipped_observers_are_executable():
    for name in ("anthropic_cost.py", "openai_cost.py", "file_observer.py"):
        path = FILE_OBSERVER.parent / name
        assert os.access(path, os.X_OK), name
        assert path.read_text().startswith("#!/usr/bin/env python3\n")


def test_observer_env_passes_the_named_variables_through(home, tmp_path):
    """``observer.env`` names variables an observer needs (a proxy, a CA bundle); others stay out."""
    from tests.conftest import clean_env, run_process

    envfile = tmp_path / "env.json"
    base = clean_env(
        LEDGER_OBSERVER_COMMAND=json.dumps([sys.executable, str(FAKE), "env"]),
        LEDGER_OBSERVER_ENVFILE=str(envfile),
        HTTPS_PROXY="http://proxy.internal:3128",
        SSL_CERT_FILE="/etc/ssl/corp.pem",
    )
    run_process(["--home", str(home), "reconcile"], env=base)
    assert "HTTPS_PROXY" not in json.loads(envfile.read_text())["env"]
    config = home / "ledger.toml"
    config.write_text(
        config.read_text().replace("[observer]\n", '[observer]\nenv = ["HTTPS_PROXY"]\n')
    )
    run_process(["--home", str(home), "reconcile"], env=base)
    env = json.loads(envfile.read_text())["env"]
    assert env["HTTPS_PROXY"] == "http://proxy.internal:3128"
    assert "SSL_CERT_FILE" not in env
    bad = run_process(
        ["--home", str(home), "reconcile"], env={**base, "LEDGER_OBSERVER_ENV": '["A B"]'}
    )
    assert bad.code == 78
    assert bad.stderr.startswith("ledger: LEDGER_OBSERVER_ENV: ")
