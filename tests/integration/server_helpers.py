"""Helpers for the `ledger serve` tests: real server processes, real clients (no tests here)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO, Result, clean_env

NOW = "2026-06-01T12:00:00Z"
HOOKS = REPO / "tests" / "fixtures" / "hooks"
_HASH = re.compile(r"\b[0-9a-f]{64}\b|\b[0-9a-f]{16}…")


@dataclass
class Server:
    """A running `ledger serve` and the lines of its log."""

    proc: subprocess.Popen[str]
    home: Path
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def watch(self) -> "Server":
        self.reader = threading.Thread(
            target=_collect, args=(self.proc.stderr, self.lines), daemon=True
        )
        self.reader.start()
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def wait(self, timeout: float = 30) -> int:
        """Wait for an exit already asked for (a second SIGTERM while the interpreter
        shuts down would find the default handler back)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Fail with what the process logged, and leave no process behind to
            # trouble later tests.
            self.proc.kill()
            self.proc.wait()
            self.close()
            raise AssertionError(f"no exit within {timeout:g} s; its log: {self.lines}") from None
        self.close()
        return code

    def close(self) -> None:
        """Wait for the log to end and close it (after the process exited)."""
        if self.reader is not None:
            self.reader.join(timeout=30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def wait_for(self, needle: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if needle in line:
                    return line
            time.sleep(0.02)
        raise AssertionError(f"{needle!r} not in the server log: {self.lines}")

    def served_count(self) -> int:
        """How many requests the server answered (from its stop line)."""
        line = self.wait_for("stopped after")
        return int(line.split("stopped after ")[1].split()[0])


def _collect(stream, lines: list[str]) -> None:
    for line in stream:
        lines.append(line.rstrip("\n"))


def start_server(
    home: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> Server:
    """Start `ledger --home HOME serve` and wait until its socket answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), *args, "serve"],
        env=env or clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = Server(proc, home).watch()
    try:
        wait_for_socket(home / "gate.sock", proc)
    except AssertionError:
        kill_quietly(server)
        raise
    return server


def wait_for_socket(
    path: Path, proc: subprocess.Popen[str] | None = None, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
                return
            except OSError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"no server answered on {path}")


def ledger(
    home: Path | str,
    *args: str | bytes,
    env: dict[str, str] | None = None,
    stdin: str | bytes | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> Result:
    """One real `python -m ledger --home HOME ARGS` process."""
    proc = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), *args],
        capture_output=True,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        env=env if env is not None else clean_env(LEDGER_NOW=NOW),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def init_home(path: Path, cap: str = "100") -> Path:
    result = ledger(path, "init", "--daily-cap-usd", cap, env=clean_env())
    assert result.code == 0, result.stderr
    return path


def entries(home: Path) -> list[dict[str, Any]]:
    path = home / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def normalized(results: list[Result]) -> list[tuple[int, str, str]]:
    """Results with each distinct entry hash replaced by its order of first appearance.

    A hash shortened to 16 digits and "…" (as warnings print one) gets the name
    of the whole hash it starts. Served entries carry their request id, so
    their hashes differ from an in-process run's.
    """
    names: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        text = match.group(0)
        if text.endswith("…"):
            whole = next((h for h in names if h.startswith(text[:-1])), text)
            return names.setdefault(whole, f"<hash{len(names)}>") + "…"
        return names.setdefault(text, f"<hash{len(names)}>")

    return [(r.code, _HASH.sub(name, r.stdout), _HASH.sub(name, r.stderr)) for r in results]


def no_server_env(**extra: str) -> dict[str, str]:
    return clean_env(LEDGER_NOW=NOW, LEDGER_NO_SERVER="1", **extra)


def served_env(**extra: str) -> dict[str, str]:
    return clean_env(LEDGER_NOW=NOW, **extra)


def assert_verifies(home: Path) -> int:
    result = ledger(home, "verify-chain", env=clean_env())
    assert result.code == 0, result.stderr
    return int(result.stdout.split()[1])


def children_alive(procs: list[subprocess.Popen[str]]) -> bool:
    return any(p.poll() is None for p in procs)


def kill_quietly(server: Server) -> None:
    if server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=30)
    server.close()
