"""Shared pieces of the batteries: sizes, the summary line, a home with a mixed chain.

Every battery runs under the normal ``pytest`` command at a size that keeps all of
them together near three minutes on a 2-core machine; ``LEDGER_BATTERY_LONG=1``
makes each one bigger. Each prints one line, ``battery <name>: N passed, N failed
(<figures>)``, straight to the terminal (``capsys.disabled``), then asserts its goal.
"""

import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, Result

LONG = os.environ.get("LEDGER_BATTERY_LONG", "").strip() not in {"", "0"}
BASE = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
STEP_SECONDS = 7
FILE_OBSERVER = REPO / "observers" / "file_observer.py"

Runner = Callable[..., Result]


def sized(default: int, long: int) -> int:
    """``long`` under ``LEDGER_BATTERY_LONG=1``, else ``default``."""
    return long if LONG else default


def iso(moment: dt.datetime) -> str:
    """An aware time as ``LEDGER_NOW`` / ``ts_utc`` text."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def summary(
    capsys: pytest.CaptureFixture[str], name: str, passed: int, failed: int, figures: str
) -> str:
    """Print the battery's one summary line to the terminal, whatever ``-s`` says."""
    line = f"battery {name}: {passed} passed, {failed} failed ({figures})"
    with capsys.disabled():
        print(f"\n{line}", flush=True)
    return line


def pct(part: int, whole: int) -> str:
    """``part / whole`` as a percentage with one decimal (``n/a`` for nothing)."""
    return "n/a" if whole == 0 else f"{100 * part / whole:.1f}%"


def usd_text(micros: int) -> str:
    """Exact decimal USD text of an integer micro-USD amount (for observer files)."""
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def observer_command(answer_file: Path) -> str:
    """``LEDGER_OBSERVER_COMMAND`` running the shipped file observer on ``answer_file``."""
    return json.dumps([sys.executable, str(FILE_OBSERVER), "--file", str(answer_file)])


def write_reading(answer_file: Path, used_micros: int, billing_ts: str) -> None:
    """Make the file observer report ``used_micros`` as of ``billing_ts``."""
    answer_file.write_text(
        f'{{"usd_used": {usd_text(used_micros)}, "billing_ts": "{billing_ts}"}}\n'
    )


@dataclass
class MixedHome:
    """A home whose chain holds every kind of event, built through the real CLI."""

    home: Path
    answer_file: Path
    run: Runner
    seconds: int = 0
    log: list[tuple[str, int]] = field(default_factory=list)
    rotated_at: str | None = None

    @property
    def chain(self) -> Path:
        return self.home / "events.jsonl"

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "LEDGER_NOW": iso(BASE + dt.timedelta(seconds=self.seconds)),
            "LEDGER_OBSERVER_COMMAND": observer_command(self.answer_file),
            **extra,
        }

    def cli(self, *args: str, codes: tuple[int, ...] = (0,), **extra: str) -> Any:
        """Run one command a step later than the last; its JSON output."""
        self.seconds += STEP_SECONDS
        result = self.run(["--home", str(self.home), *args], env=self.env(**extra))
        assert result.code in codes, (args, result)
        self.log.append((args[0], result.code))
        return json.loads(result.stdout) if result.stdout.strip() else None

    def spend_pair(self, index: int, provider: str) -> None:
        """A verdict and the record that settles it."""
        verdict = self.cli(
            "verdict", f"{1 + index % 3}.25", "--provider", provider,
            "--cycle-id", f"cycle-{index}", "--agent", f"agent-{index % 2}",
        )  # fmt: skip
        self.cli(
            "record", f"{index % 3}.75", "--provider", provider,
            "--verdict-ref", verdict["verdict_ref"], "--model-id", "model-x",
            "--cycle-id", f"cycle-{index}", "--input-tokens", str(100 + index),
            "--output-tokens", str(50 + index),
        )  # fmt: skip

    def reconcile(self) -> None:
        """A reconcile whose observer reports exactly the local counter (no drift)."""
        used = self.cli("usage")["usd_used_micros"]
        write_reading(self.answer_file, used, iso(BASE + dt.timedelta(seconds=self.seconds + 1)))
        self.seconds += 1
        outcome = self.cli("reconcile")
        assert outcome["status"] == "ok", outcome


def build_mixed_home(run: Runner, home: Path, workdir: Path, *, pairs: int = 8) -> MixedHome:
    """Verdicts, records, reconciles, agent budgets, a key rotation, a snapshot, a
    rebuild-state and a final checkpoint covering every entry."""
    workdir.mkdir(parents=True, exist_ok=True)
    result = run(["--home", str(home), "init", "--daily-cap-usd", "100"])
    assert result.code == 0, result
    mixed = MixedHome(home, workdir / "observer.json", run)
    for index in range(pairs):
        mixed.spend_pair(index, "openai" if index % 2 else "anthropic")
        if index % 3 == 2:
            mixed.reconcile()
    mixed.cli("verdict", "500", "--provider", "openai", codes=(1,))  # halt-100
    mixed.cli("tokens", "create", "convoy-a", "--convoy-max", "10000", "--agent-max", "5000")
    check = mixed.cli("tokens", "check", "convoy-a", "agent-1", "1000")
    mixed.cli(
        "tokens", "record", "convoy-a", "agent-1", "400", "500", "--check-ref", check["check_ref"]
    )
    mixed.cli("turns", "create", "wf-1", "--total", "10", "--phase", "5")
    mixed.cli("turns", "record", "wf-1")
    mixed.cli("tools", "create", "tool-agent", "--role", "explorer")
    mixed.cli("tools", "use", "tool-agent")
    rotated = mixed.cli("keys", "rotate")
    mixed.rotated_at = rotated["rotated_at"]
    mixed.cli("rebuild-state")
    for index in range(pairs, pairs + pairs // 2 + 1):
        mixed.spend_pair(index, "openai")
    mixed.reconcile()
    mixed.cli("snapshot")
    mixed.spend_pair(99, "anthropic")
    mixed.cli("verdict", "0.5")
    mixed.cli("checkpoint")
    return mixed


def forge_entry(
    home: Path, env: dict[str, str], event_type: str, payload: Any, moment: dt.datetime
) -> str:
    """Sign and append any payload with the home's own active key, unchecked.

    Like ``tests.gate_helpers.append_raw_entry(validate=False)``, which seals floats
    through ``rfc8785``; an integer beyond ±(2^53−1), which ``rfc8785`` refuses, is
    sealed in the layout the product writes (sorted keys, no spaces, ASCII), the way a
    faulty writer holding the key could. A payload that is not an object (which the
    chain's writer refuses to append) is signed and written to the file directly.
    Returns the entry's hash.
    """
    import rfc8785

    from ledger.core.canonical import sha256_hex
    from ledger.core.envelope import render_line, unsigned_entry
    from ledger.core.timefmt import format_ts
    from ledger.runtime import Runtime
    from ledger.services.chain.writer import Writer
    from tests.gate_helpers import append_raw_entry

    if isinstance(payload, dict):
        try:
            return append_raw_entry(home, env, event_type, payload, moment, validate=False)
        except rfc8785.IntegerDomainError:
            pass
    runtime = Runtime(home, {**env})
    signer = Writer(runtime).signer()
    with runtime.chain.transaction() as tx:
        head = tx.head()
        entry = unsigned_entry(
            event_type, payload, format_ts(moment), head.entry_hash if head else "GENESIS"
        )
        preimage = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode("ascii")
        line = render_line(preimage, signer.sign_b64(preimage), signer.key_id)
        if isinstance(payload, dict):
            # Given its hash, the append need not parse back a line the parser may refuse
            # (an integer beyond 2^53-1 has no RFC 8785 form).
            tx.append(
                line, entry_hash=sha256_hex(preimage), ts_utc=entry["ts_utc"], event_type=event_type
            )
        else:
            with (home / "events.jsonl").open("ab") as chain:
                chain.write(line)
        return sha256_hex(preimage)
