"""Shared fixtures: homes, command runners (in-process and real processes)."""

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Imported now, not lazily inside a test: CPython 3.11's AST builder can report
# "recursion depth mismatch" when it first parses a module after a test has
# driven the JSON parser into RecursionError (the bad-input battery does).
import hypothesis.strategies._internal.types  # noqa: F401
import pytest
from hypothesis import HealthCheck, settings

from tests.pg import own_pg_server, pg_server, pg_store_env  # noqa: F401 - fixtures

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "dev",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "long",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    """What a command printed and returned."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any LEDGER_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(extra)
    return env


def run_process(
    args: list[str],
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 60,
) -> Result:
    """Run ``python -m ledger ARGS`` as a real process."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", *args],
        capture_output=True,
        text=True,
        env=env if env is not None else clean_env(),
        input=stdin,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def run_inproc(monkeypatch: pytest.MonkeyPatch):
    """Run the CLI in this process (fast), with env overrides and optional stdin."""

    def runner(args: list[str], env: dict[str, str] | None = None, stdin: str = "") -> Result:
        from ledger.cli import main

        for key in list(os.environ):
            if key.startswith("LEDGER_"):
                monkeypatch.delenv(key)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        # As the installed launcher would run it, so what the CLI writes about
        # itself (hook commands) names `ledger`, not the test runner.
        monkeypatch.setattr(sys, "argv", [str(Path(sys.executable).parent / "ledger"), *args])
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(args)
            except SystemExit as exc:
                code = int(exc.code or 0)
        return Result(code, out.getvalue(), err.getvalue())

    return runner


@pytest.fixture
def home(request: pytest.FixtureRequest, tmp_path: Path, run_inproc) -> Path:
    """An initialized home with a $100 daily cap.

    Parametrised indirectly with ``"postgres"`` (``tests.pg.STORES``), the home's
    chain, state and trust store live in a fresh schema of the test server.
    """
    path = tmp_path / "home"
    env = {}
    if getattr(request, "param", "file") == "postgres":
        env = request.getfixturevalue("pg_store_env")
    result = run_inproc(["--home", str(path), "init", "--daily-cap-usd", "100"], env)
    assert result.code == 0, result.stderr
    return path
