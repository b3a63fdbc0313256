"""``report --day`` reads only the part of the chain its day depends on, found through the rollups.

Its figures equal a fold of the whole chain (the reference), for every day of
a chain with calls over many days, reservations settled after midnight,
budgets of every period, halts and a reporting zone that is not UTC.
"""

from pathlib import Path
from typing import Any

import pytest

from ledger.runtime import Runtime
from ledger.services.views.report import gather
from tests.integration.test_budgets import with_budgets

BUDGETS = """
[[budgets]]
name = "per-session"
usd = 3
period = "day"
per = "session"

[[budgets]]
name = "team"
usd = 40
period = "week"
match = { agent = "team-*" }

[[budgets]]
name = "month"
usd = 100
period = "month"

[[budgets]]
name = "burst"
usd = 6
period = "rolling:1d"
match = { provider = "anthropic" }
"""
ZONE = {"LEDGER_USD_DAY_TIMEZONE": "America/New_York"}
DAYS = [f"2026-03-{day:02d}" for day in range(1, 13)]


def _call(run_inproc, home: Path, when: str, usd: str, settle_at: str, *scope: str) -> None:
    verdict = run_inproc(["--home", str(home), "verdict", usd, "--provider", "anthropic",
                          *scope], {"LEDGER_NOW": when, **ZONE})  # fmt: skip
    assert verdict.code in (0, 1), verdict.stderr
    if verdict.json()["verdict"] in ("allow", "warn-90"):
        done = run_inproc(["--home", str(home), "record", usd, "--provider", "anthropic",
                           "--verdict-ref", verdict.json()["verdict_ref"]],
                          {"LEDGER_NOW": settle_at, **ZONE})  # fmt: skip
        assert done.code == 0, done.stderr


@pytest.fixture
def busy(home: Path, run_inproc) -> Path:
    with_budgets(home, BUDGETS)
    for index, day in enumerate(DAYS[1:-2]):
        for hour, usd in ((3, "0.75"), (14, "1.5"), (22, "2.25")):
            agent = ("team-a", "team-b", "solo")[(index + hour) % 3]
            when = f"{day}T{hour:02d}:30:00Z"
            _call(run_inproc, home, when, usd, f"{day}T{hour:02d}:31:00Z",
                  "--agent", agent, "--cycle-id", f"s{index % 2}")  # fmt: skip
        # A reservation made before midnight in the reporting zone, settled after it.
        _call(run_inproc, home, f"{day}T04:58:00Z", "0.5", f"{day}T05:03:00Z",
              "--agent", "team-a", "--cycle-id", "late")  # fmt: skip
    return home


def _documents(home: Path, day: str, by: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    env = {"LEDGER_NOW": "2026-03-12T18:00:00Z", **ZONE}
    window = gather(Runtime(home, env), day, by).to_document()
    whole = gather(Runtime(home, env), day, by, whole_chain=True).to_document()
    return window, whole


@pytest.mark.parametrize("by", [None, "session"])
def test_every_days_report_equals_a_fold_of_the_whole_chain(busy: Path, by: str | None) -> None:
    spent = 0
    for day in DAYS:
        window, whole = _documents(busy, day, by)
        assert window == whole, day
        spent += window["scopes"][0]["counter_micros"]
    assert spent > 0
    assert any(item["budgets"] for item in [_documents(busy, DAYS[3], by)[0]])


def test_a_days_report_reads_only_its_part_of_the_chain(busy: Path) -> None:
    """A counting seam on the chain's reader: the day's window, not the chain from line 1."""
    env = {"LEDGER_NOW": "2026-03-12T18:00:00Z", **ZONE}
    runtime = Runtime(busy, env)
    gather(runtime, DAYS[5], None)  # the rollups caught up: later reads fold nothing new
    size = (busy / "events.jsonl").stat().st_size
    runtime = Runtime(busy, env)
    read: list[tuple[int, int | None]] = []
    real = runtime.chain.iter_lines

    def counted(start: int = 0, end: int | None = None) -> Any:
        read.append((start, end))
        return real(start, end)

    runtime.chain.iter_lines = counted  # type: ignore[method-assign]
    gather(runtime, DAYS[1], None)
    assert read, "the day's entries were read"
    assert all(start > 0 or (end is not None and end < size // 2) for start, end in read), read


def test_an_entry_edited_inside_the_days_window_is_refused(busy: Path) -> None:
    from ledger.errors import ChainBrokenError

    env = {"LEDGER_NOW": "2026-03-12T18:00:00Z", **ZONE}
    gather(Runtime(busy, env), DAYS[4], None)
    chain = busy / "events.jsonl"
    lines = chain.read_bytes().splitlines(keepends=True)
    target = next(i for i, line in enumerate(lines) if b"2026-03-05T14:31" in line)
    lines[target] = lines[target].replace(b'"actual_micros":', b'"actual_micros":1', 1)
    chain.write_bytes(b"".join(lines))
    with pytest.raises(ChainBrokenError):
        gather(Runtime(busy, env), DAYS[4], None)
