"""The console tests' parts: a home with a gateway in front of the fake provider, and `ledger console`.

Every part is a real process: the fake provider, ``ledger proxy`` with gateway
keys required, and ``ledger console`` on a free port, all on one home.
"""

import json
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import clean_env, run_process
from tests.gateway.helpers import (
    ANTHROPIC_HEADERS,
    NOW,
    Proxy,
    Upstream,
    anthropic_body,
    start_proxy,
    start_upstream,
    write_config,
)

_SIGN_IN = re.compile(r"(https?://\S+)/console/login\?token=(\S+)")


@dataclass
class Console:
    """A running ``ledger console``: its base URL and the one-time token it printed."""

    proc: subprocess.Popen[str]
    url: str = ""
    token: str = ""
    lines: list[str] = field(default_factory=list)

    def stop(self) -> int:
        """SIGTERM, then its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code


def start_console(home: Path, *args: str, env: dict[str, str] | None = None) -> Console:
    """``ledger console --listen 127.0.0.1:0`` once it printed its sign-in link."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "console",
         "--listen", "127.0.0.1:0", *args],
        env=env or clean_env(LEDGER_NOW=NOW), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    console = Console(proc)
    assert proc.stderr is not None
    for line in proc.stderr:
        console.lines.append(line)
        found = _SIGN_IN.search(line)
        if found:
            console.url, console.token = found.group(1), found.group(2)
            break
    else:
        raise AssertionError("".join(console.lines))
    threading.Thread(target=lambda: console.lines.extend(proc.stderr or ()), daemon=True).start()
    return console


@dataclass
class Stack:
    """One home with its fake provider, gateway and console, and the keys made for the tests."""

    home: Path
    upstream: Upstream
    proxy: Proxy
    console: Console
    secrets: dict[str, str]

    def ledger(self, *args: str) -> dict[str, Any]:
        """A ``ledger`` command's JSON on this home (LEDGER_NOW as the gateway's)."""
        result = run_process(["--home", str(self.home), *args], clean_env(LEDGER_NOW=NOW))
        assert result.code == 0, result.stderr
        parsed: dict[str, Any] = json.loads(result.stdout)
        return parsed

    def call(self, key: str, **headers: str) -> httpx.Response:
        """One Anthropic call through the gateway with a gateway key."""
        sent = {**ANTHROPIC_HEADERS, "x-api-key": key, **headers}
        return httpx.post(f"{self.proxy.url}/v1/messages", content=anthropic_body(),
                          headers=sent, timeout=30)  # fmt: skip


def start_stack(home: Path) -> Stack:
    """Init a home, issue keys (admin, viewer, two gateway keys), start everything."""
    env = clean_env(LEDGER_NOW=NOW)
    made = run_process(["--home", str(home), "init", "--daily-cap-usd", "100"], env)
    assert made.code == 0, made.stderr
    upstream = start_upstream()
    write_config(home, upstream.url, extra="[proxy]\nrequire_keys = true\n\n")
    secrets = {}
    keys: tuple[tuple[str, list[str]], ...] = (("lead", ["--role", "admin"]), ("watcher", ["--role", "viewer"]), ("alice", []),
            ("bob", ["--tag", "team:b"]))  # fmt: skip
    for name, options in keys:
        issued = run_process(["--home", str(home), "keys", "issue", name, *options], env)
        assert issued.code == 0, issued.stderr
        secrets[name] = json.loads(issued.stdout)["key"]
    proxy = start_proxy(home, "--listen", "127.0.0.1:0",
                        env=clean_env(LEDGER_NOW=NOW, ANTHROPIC_API_KEY="sk-ant-gateway"))  # fmt: skip
    try:
        console = start_console(home)
    except BaseException:
        proxy.stop()
        upstream.stop()
        raise
    return Stack(home, upstream, proxy, console, secrets)


def stop_stack(stack: Stack) -> None:
    """Stop the console, the gateway and the fake provider."""
    stack.console.stop()
    stack.proxy.stop()
    stack.upstream.stop()
