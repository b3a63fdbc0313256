"""ledger metrics on a long chain reads no chain line, and counts as a full pass does."""

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.edges.files.chainfile import ChainFile
from ledger.services.views.metrics import scan_chain
from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

ENTRIES = 3_000  # two minutes apart: 2026-11-22 08:00 to 2026-11-26 11:58
NOW = {"LEDGER_NOW": "2026-11-26T12:30:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}
LATER = {**NOW, "LEDGER_NOW": "2026-11-26T12:40:00Z"}
TODAY = ("2026-11-26T00:00:00Z", "2026-11-27T00:00:00Z")


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_reads_the_derived_state_only_and_agrees_with_a_full_pass(
    home: Path, run_inproc, monkeypatch: pytest.MonkeyPatch
):
    """The entry count, the snapshot's age and today's verdicts come from the derived state,
    equal to a pass over every line; without today's counts in the state (a state kept by an
    older version) only the lines since today began are read, found by bisection."""
    append_entries(home, ENTRIES, clean_env(), step=dt.timedelta(minutes=2))
    h = ["--home", str(home)]
    assert run_inproc([*h, "snapshot"], env=NOW).code == 0
    for _ in range(3):
        assert run_inproc([*h, "verdict", "0.01"], env=NOW).code == 0
    chain = home / "events.jsonl"
    with chain.open("rb") as lines:
        entries, verdicts, snapshot_ts = scan_chain(lines, TODAY)
    assert (entries, sum(verdicts.values()), snapshot_ts) == (
        ENTRIES + 4,
        3,
        "2026-11-26T12:30:00.000000Z",
    )
    read = []
    inner = ChainFile.iter_lines

    def counting(self: ChainFile, start: int = 0, end: int | None = None):
        for raw in inner(self, start, end):
            read.append(raw)
            yield raw

    monkeypatch.setattr(ChainFile, "iter_lines", counting)
    result = run_inproc([*h, "metrics"], env=LATER)
    assert result.code == 0, result.stderr
    got = _samples(result.stdout)
    assert got["ledger_chain_entries", ()] == ENTRIES + 4
    assert got["ledger_verdicts_today", (("outcome", "allow"), ("reason", ""))] == 3
    assert got["ledger_snapshot_age_seconds", ()] == 600.0
    assert read == []

    stored = home / "state" / "derived.json"
    body, _mac = stored.read_bytes().splitlines()
    older = json.loads(body)
    del older["data"]["meta"]["today"]
    _reseal(stored, older)
    again = run_inproc([*h, "metrics"], env=LATER)
    assert _samples(again.stdout) == got
    # Today's 360 records and what came after, and a line or two per probe of the bisection.
    assert 360 < len(read) < 500, len(read)


def _reseal(path: Path, document: dict[str, Any]) -> None:
    from ledger.edges.files.statemac import mac_key, sealed

    key = mac_key(path.parent.parent / "keys" / "state-mac.key", create=False)
    assert key is not None
    path.write_bytes(sealed(document, key))
