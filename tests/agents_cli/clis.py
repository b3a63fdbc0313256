"""The real agent CLIs, installed from npm at pinned versions into a cache, and run sealed off.

``python -m tests.agents_cli.clis`` installs every pinned CLI that is missing
(the test command runs it); the tests call ``installed`` for the one they
need, so a test run without the test command installs it too. An install is
``npm install --prefix <cache>/<package>@<version>``, kept across runs, so a
re-run costs nothing.

A CLI runs headless with HOME in a temporary directory, a fake key, its
telemetry off, and every proxy variable pointing at a closed port on
127.0.0.1 (``NO_PROXY`` lets it reach only loopback), so it reaches no host
but the gateway in front of the fake provider.
"""

import fcntl
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CLAUDE_CODE = "@anthropic-ai/claude-code"
CODEX = "@openai/codex"
GEMINI_CLI = "@google/gemini-cli"
# npm's `latest` Claude Code and the release before it, and 2.1.197, a release
# that ignored `continue: false` next to `permissionDecision: "deny"`.
CLAUDE_CODE_RELEASES = ("2.1.332", "2.1.331", "2.1.197")
PINNED = {
    **{f"{CLAUDE_CODE}@{version}": "claude" for version in CLAUDE_CODE_RELEASES},
    f"{CODEX}@0.171.0": "codex",
    f"{GEMINI_CLI}@0.61.0": "gemini",
}
_INSTALL_TIMEOUT = 600


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ledger-tests" / "npm"


class UnavailableError(Exception):
    """The CLI cannot be installed here; the message says why (a test skips with it)."""


def installed(spec: str) -> Path:
    """The executable of ``spec`` (``<package>@<version>``), installed into the cache if missing.

    Raises:
        UnavailableError: npm is not on PATH, or the install failed (its output in the message).
    """
    prefix = cache_dir() / spec.replace("/", "+")
    executable = prefix / "node_modules" / ".bin" / PINNED[spec]
    if executable.exists():
        return executable
    npm = shutil.which("npm")
    if npm is None:
        raise UnavailableError(f"npm is not installed, so {spec} cannot be installed for this test")
    prefix.mkdir(parents=True, exist_ok=True)
    # Test processes running side by side may need the same CLI: one installs, the others wait.
    with (prefix.parent / f"{prefix.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if executable.exists():
            return executable
        return _install(npm, spec, prefix, executable)


def _install(npm: str, spec: str, prefix: Path, executable: Path) -> Path:
    # From a neutral directory: npm reads a spec that names an existing folder as a path.
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error",
         spec],
        cwd=prefix, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not executable.exists():
        raise UnavailableError(f"npm install {spec} failed: {done.stderr.strip()[-400:]}")
    return executable


def dead_end() -> str:
    """The URL of a closed port on 127.0.0.1: a proxy there refuses every connection."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def sealed_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for a CLI: HOME at ``home``, proxies at a dead end, telemetry off."""
    proxy = dead_end()
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "CI": "1",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "DO_NOT_TRACK": "1",
    }
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = proxy
    env.update(extra)
    return env


@dataclass
class Run:
    """What a CLI printed and returned."""

    code: int
    stdout: str
    stderr: str


def run(
    executable: Path, args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120
) -> Run:
    """Run the CLI to its end (stdin closed)."""
    done = subprocess.run(
        [str(executable), *args], env=env, cwd=cwd, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=timeout, check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr)


def main() -> int:
    failed = 0
    for spec in PINNED:
        try:
            print(installed(spec))
        except UnavailableError as exc:
            failed += 1
            print(f"tests.agents_cli.clis: {exc}", file=sys.stderr)
    return 1 if failed and shutil.which("npm") else 0


if __name__ == "__main__":
    raise SystemExit(main())
