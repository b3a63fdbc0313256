"""Every console page answers from derived state and the rollups, never by reading the chain.

A counting seam on the chain's line reader: once the rollups are current, no
page reads a line; after new entries, a page reads those entries only.
"""

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ledger.console import data
from ledger.runtime import Runtime

NOW = "2026-03-10T12:00:00Z"


class ChainReadError(AssertionError):
    """The chain's lines were read."""


def _runtime(home: Path, reads: list[tuple[int, int | None]] | None = None) -> Runtime:
    runtime = Runtime(home, {"LEDGER_NOW": NOW})
    real = runtime.chain.iter_lines

    def counted(start: int = 0, end: int | None = None) -> Any:
        if reads is None:
            raise ChainReadError(f"lines {start}..{end} read")
        reads.append((start, end))
        return real(start, end)

    runtime.chain.iter_lines = counted  # type: ignore[method-assign]
    return runtime


def _record(run_inproc, home: Path, usd: str, when: str, *scope: str) -> None:
    verdict = run_inproc(["--home", str(home), "verdict", usd, "--provider", "openai", *scope],
                         {"LEDGER_NOW": when})  # fmt: skip
    assert verdict.code == 0, verdict.stderr
    done = run_inproc(["--home", str(home), "record", usd, "--provider", "openai",
                       "--verdict-ref", verdict.json()["verdict_ref"]], {"LEDGER_NOW": when})  # fmt: skip
    assert done.code == 0, done.stderr


def _pages(runtime: Runtime) -> dict[str, Any]:
    zone = data.reporting_zone(runtime)[1]
    filters = data.parse_filters({"limit": "10"}, zone)
    key = SimpleNamespace(name="alice", agent="alice", tags=(), expires=None)
    return {
        "overview": data.overview(runtime),
        "spend": data.spend(runtime, data.parse_filters({"by": "agent"}, zone)),
        "calls": data.call_rows(runtime, filters),
        "me": data.me(runtime, key),
        "halts": data.halt_histogram(runtime),
    }


@pytest.fixture
def spent(home: Path, run_inproc) -> Path:
    for index, usd in enumerate(("1", "2.5", "0.25")):
        _record(run_inproc, home, usd, f"2026-03-10T1{index}:00:00Z", "--agent", f"a{index}")
    return home


def test_pages_answer_without_reading_the_chain_once_the_rollups_are_current(spent: Path) -> None:
    before = _pages(_runtime(spent, []))  # the rollups built (the chain read once)
    after = _pages(_runtime(spent))  # any line read now fails the test
    assert after["calls"] == before["calls"]
    assert len(after["calls"]["calls"]) == 3
    assert after["spend"]["total"]["micros"] == 3_750_000
    assert {g["value"] for g in after["spend"]["groups"]} == {"a0", "a1", "a2"}
    assert after["overview"]["chain"]["entries"] == 6


def test_after_new_entries_a_page_reads_only_those(spent: Path, run_inproc) -> None:
    _pages(_runtime(spent, []))
    size = (spent / "events.jsonl").stat().st_size
    _record(run_inproc, spent, "4", "2026-03-10T12:30:00Z", "--agent", "a3")
    reads: list[tuple[int, int | None]] = []
    page = data.call_rows(_runtime(spent, reads), data.parse_filters({}, dt.UTC))
    assert page["calls"][0]["agent"] == "a3"
    assert reads
    assert all(start >= size for start, _end in reads), reads
