"""The two trees the findings bench compares, each running its own ``ledger`` against one fake.

A side is a checkout (``before``: an older commit's tree, ``after``: this one);
its homes are made by its own ``ledger init`` and its gateway is its own
``python -P -m ledger proxy`` (``PYTHONPATH`` names the tree; ``-P`` keeps the
working directory, this tree, off the front of ``sys.path``). Every side talks
to the same fake provider (this tree's ``tests/fakes``), whose request log is
cut per run so each figure counts only what that side sent.
"""

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from bench_gateway import Gateway

from tests.gateway.helpers import chain, write_config

VERDICTS = {"budget.allow", "budget.warn_90", "budget.halt_100", "budget.halt_uncertainty"}


@dataclass(frozen=True)
class Side:
    name: str
    tree: Path

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment without LEDGER_*, importing ``ledger`` from the tree."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        return {**env, "PYTHONPATH": str(self.tree), **extra}

    def ledger(self, home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """``ledger --home HOME ARGS`` of this tree; stops the bench if it fails."""
        done = subprocess.run(
            [sys.executable, "-P", "-m", "ledger", "--home", str(home), *args],
            env=self.env(**extra), capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: ledger {' '.join(args)}: {done.stderr}")
        return done

    def home(self, root: Path, upstream: str, cap: str, extra: str = "") -> Path:
        """A home made by this tree's ``init``, configured as the gateway tests' are."""
        home = root / f"{self.name}-{time.monotonic_ns()}"
        self.ledger(home, "init")
        write_config(home, upstream, cap, extra)
        return home

    @contextmanager
    def gateway(self, home: Path, **environ: str) -> Iterator[Gateway]:
        """This tree's ``ledger proxy`` on ``home`` until the block ends."""
        running = Gateway(home, [sys.executable, "-P", "-m", "ledger"], self.env(**environ))
        try:
            yield running
        finally:
            running.stop()


class Fake:
    """The fake provider's request log, read over HTTP, cut at marks."""

    def __init__(self, url: str) -> None:
        self.url = url

    def requests(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = httpx.get(f"{self.url}/_control/requests").json()["requests"]
        return found

    def mark(self) -> int:
        return len(self.requests())

    def since(self, mark: int) -> list[dict[str, Any]]:
        return self.requests()[mark:]

    def release(self, gate: str) -> None:
        httpx.post(f"{self.url}/_control/release/{gate}")


def verdict_payloads(home: Path) -> list[dict[str, Any]]:
    return [e["payload"] for e in chain(home) if e["event_type"] in VERDICTS]


def record_payloads(home: Path) -> list[dict[str, Any]]:
    return [e["payload"] for e in chain(home) if e["event_type"] == "budget.record_call"]


def wait_records(home: Path, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    """The home's records once there are ``count`` (a record is sealed after the answer)."""
    deadline = time.monotonic() + timeout
    found = record_payloads(home)
    while len(found) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        found = record_payloads(home)
    return found


def body_of(sent: dict[str, Any]) -> dict[str, Any]:
    """A logged request's JSON body (``{}`` when it had none)."""
    text = sent["body"]
    found: dict[str, Any] = json.loads(text) if text else {}
    return found


def usd(micros: float) -> str:
    return f"${micros / 1e6:.4g}"
