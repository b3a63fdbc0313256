"""Real processes for the gateway tests: a local upstream, `ledger proxy`, and a home for them."""

import json
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ledger.providers import estimate_request, route
from tests.conftest import REPO, clean_env

NOW = "2026-06-01T12:00:00Z"
# Prices of the test models, USD per million tokens (set in ledger.toml).
PRICES = {
    "anthropic/claude-test": (3, 15),
    "anthropic/claude-flat": (0, 10),
    "openai/gpt-test": (2, 8),
    "google/gemini-test": (1, 4),
}
_LISTENING = re.compile(r"listening on (https?://[^\s]+) ")


def micros(provider_model: str, input_tokens: int, output_tokens: int) -> int:
    """The exact cost of a call at the test prices."""
    input_rate, output_rate = PRICES[provider_model]
    return input_tokens * input_rate + output_tokens * output_rate


@dataclass
class Upstream:
    proc: subprocess.Popen[str]
    url: str

    def requests(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = httpx.get(f"{self.url}/_control/requests").json()["requests"]
        return found

    def calls(self) -> list[dict[str, Any]]:
        """Every model call answered in agent mode, with its usage (the provider's truth)."""
        found: list[dict[str, Any]] = httpx.get(f"{self.url}/_control/calls").json()["calls"]
        return found

    def refuse(self) -> None:
        """Make every later model call a 402 in the provider's shape, as a halt is."""
        httpx.post(f"{self.url}/_control/refuse")

    def release(self, name: str, times: int = 1) -> None:
        for _ in range(times):
            httpx.post(f"{self.url}/_control/release/{name}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_upstream(*, agent: bool = False) -> Upstream:
    """The fake provider as its own process; ``agent`` starts its scripted agent mode."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.provider", *(["--agent"] if agent else [])],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    assert port.isdigit(), f"the upstream did not start: {port!r}"
    return Upstream(proc, f"http://127.0.0.1:{port}")


def write_config(home: Path, upstream_url: str, cap_usd: str = "100", extra: str = "") -> None:
    """A gateway's ledger.toml: the cap, the test prices, and the local upstream."""
    prices = "".join(
        f'\n[prices."{name}"]\ninput_per_mtok = {rates[0]}\noutput_per_mtok = {rates[1]}\n'
        for name, rates in PRICES.items()
    )
    (home / "ledger.toml").write_text(
        f"[usd]\ndaily_cap = {cap_usd}\n\n"
        # Without an observer, usage above 75 % halts; these tests are about the
        # gateway, so only the cap decides.
        "[billing]\nstale_halt_pct = 100\n\n"
        f'[proxy.upstream]\nanthropic = "{upstream_url}"\nopenai = "{upstream_url}"\n'
        f'google = "{upstream_url}"\n'
        f"{extra}{prices}"
    )


@dataclass
class Proxy:
    proc: subprocess.Popen[str]
    home: Path
    url: str = ""
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"no exit within {timeout:g} s; log: {self.lines}") from None
        if self.reader is not None:
            self.reader.join(timeout=30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code

    def wait_for(self, needle: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if needle in line:
                    return line
            if self.proc.poll() is not None and self.reader is not None:
                self.reader.join(timeout=5)
                break
            time.sleep(0.02)
        for line in list(self.lines):
            if needle in line:
                return line
        raise AssertionError(f"{needle!r} not in the proxy log: {self.lines}")


def _collect(stream: Any, lines: list[str]) -> None:
    for line in stream:
        lines.append(line.rstrip("\n"))


def start_proxy(home: Path, *args: str, env: dict[str, str] | None = None) -> Proxy:
    """`ledger --home HOME proxy --listen 127.0.0.1:0 ARGS`, once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "--home", str(home), "proxy", *args],
        env=env or clean_env(LEDGER_NOW=NOW),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    proxy = Proxy(proc, home)
    proxy.reader = threading.Thread(target=_collect, args=(proc.stderr, proxy.lines), daemon=True)
    proxy.reader.start()
    line = proxy.wait_for("listening on")
    found = _LISTENING.search(line)
    assert found is not None, line
    proxy.url = found.group(1)
    return proxy


def chain(home: Path) -> list[dict[str, Any]]:
    """The home's chain entries."""
    path = home / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def records(home: Path) -> list[dict[str, Any]]:
    """The payloads of the chain's spend records."""
    return [e["payload"] for e in chain(home) if e["event_type"] == "budget.record_call"]


def verdicts(home: Path) -> list[dict[str, Any]]:
    """The chain's verdict entries."""
    return [e for e in chain(home) if e["event_type"].startswith("budget.") and
            e["event_type"] in {"budget.allow", "budget.warn_90", "budget.halt_100",
                                "budget.halt_uncertainty"}]  # fmt: skip


ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


def anthropic_body(model: str = "claude-test", *, stream: bool = False, **extra: Any) -> bytes:
    body = {"model": model, "max_tokens": 1000, "stream": stream,
            "messages": [{"role": "user", "content": "hi"}], **extra}  # fmt: skip
    return json.dumps(body).encode()


OPENAI_HEADERS = {"authorization": "Bearer sk-test"}
# Each route's path and a streamed request to it, with an output limit of 1,000 tokens.
STREAM_ROUTES = {
    "messages": ("/v1/messages", "anthropic/claude-test"),
    "chat_completions": ("/v1/chat/completions", "openai/gpt-test"),
    "responses": ("/v1/responses", "openai/gpt-test"),
}

# Data events of each route's stream, its full usage, and a request's estimate
# (one input token, "hi", with its provider's framing, and the request's 1,000
# output tokens).
STREAM_EVENTS = {"messages": 6, "chat_completions": 4, "responses": 3}
STREAM_FULL_MICROS = {
    "messages": micros("anthropic/claude-test", 1000, 700),
    "chat_completions": micros("openai/gpt-test", 2000, 500),
    "responses": micros("openai/gpt-test", 3000, 900),
}


def stream_body(kind: str) -> bytes:
    """A streamed request of route ``kind`` whose input estimate is one token ("hi")."""
    if kind == "messages":
        return anthropic_body(stream=True)
    if kind == "chat_completions":
        body = {"model": "gpt-test", "max_completion_tokens": 1000, "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    else:
        body = {"model": "gpt-test", "max_output_tokens": 1000, "stream": True, "input": "hi"}
    return json.dumps(body).encode()


def _framed_input(kind: str) -> int:
    found = route("POST", STREAM_ROUTES[kind][0])
    assert found is not None
    return estimate_request(found, stream_body(kind)).input_tokens


STREAM_ESTIMATE_MICROS = {
    kind: micros(model, _framed_input(kind), 1000) for kind, (_path, model) in STREAM_ROUTES.items()
}


def stream_headers(kind: str) -> dict[str, str]:
    """The provider headers of route ``kind``."""
    return dict(ANTHROPIC_HEADERS if kind == "messages" else OPENAI_HEADERS)
