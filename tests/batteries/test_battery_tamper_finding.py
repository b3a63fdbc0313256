# ruff: noqa: S608 - schema names are the tests' own identifiers
"""Battery: the gate after a BROKEN finding, for every tamper kind, on both stores.

The gate folds the chain incrementally and never re-reads a folded line, so most
damage to lines it has already folded (an edited field, a flipped byte, a swap, a
stripped signature, a line signed by a revoked key...) leaves verdicts admitting.
``verify-chain`` on the home's chain sees it; from then on every verdict must halt
``counter_inconsistent`` naming the line, until ``ledger recover``.

For each tamper kind of the tamper battery (``KINDS``), cases that ``verify-chain``
must report BROKEN under the home's own rules (no ``--strict``, no
``--allow-markers``) are applied to a copy of the mixed home (the file store), and
the same damage is written into a PostgreSQL store's ``chain`` table by SQL with
the tamper note switched off (``SET ledger.recovering = on``, which any role may
set). Then ``verify-chain`` runs on the home and a ``verdict 1`` follows: an
``allow`` or ``warn-90`` is a fail-open. The summary line reports the fail-opens
per store; the battery fails on any.
"""

import datetime as dt
import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger.core.canonical import canonical_bytes
from ledger.core.envelope import parse_line
from ledger.core.timefmt import parse_ts
from ledger.core.trust import TrustStore, trust_document, trust_from_document
from ledger.edges.files.checkpointfiles import CheckpointDir
from ledger.edges.files.keyfiles import KeyDir
from tests.batteries.common import build_mixed_home, iso, sized, summary
from tests.batteries.test_battery_tamper import KINDS, SEED, Case, Chain, load_chain

PER_KIND = sized(3, 20)
PG_PER_KIND = sized(1, 5)


def _cases(chain: Chain, rng: random.Random, per_kind: int) -> list[Case]:
    """Damage ``verify-chain`` must report under the home's own rules, per kind."""
    picked: list[Case] = []
    for maker in KINDS.values():
        found: list[Case] = []
        for index in range(per_kind * 40):
            case = maker(chain, rng, index)
            if case.expected is not None and not case.strict and not case.allow_markers:
                found.append(case)
            if len(found) == per_kind:
                break
        picked.extend(found)
    return picked


def _judge(run: Any, home: Path, case: Case, now: dt.datetime, tally: Counter[str]) -> str | None:
    """verify-chain, then a verdict: the problem found, or ``None``."""
    env = {"LEDGER_NOW": iso(now), "LEDGER_BILLING_STALE_HALT_PCT": "100"}
    verified = run(["--home", str(home), "verify-chain"], env=env)
    if verified.code != 1 or not verified.stderr.startswith("BROKEN line "):
        return f"verify-chain did not report BROKEN: {verified}"
    tally["findings"] += 1
    result = run(["--home", str(home), "verdict", "1"], env=env)
    if "Traceback" in result.stdout + result.stderr or not result.stdout.strip():
        return f"verdict printed no decision: {result}"
    body = json.loads(result.stdout)
    if body["verdict"] in {"allow", "warn-90"}:
        tally["fail-open"] += 1
        return f"admitted after a BROKEN finding: {body['verdict']}"
    if body["uncertainty_reason"] != "counter_inconsistent":
        return f"halted for another reason: {body['uncertainty_reason']}"
    return None


def _write_trust(home: Path, trust: TrustStore) -> None:
    (home / "trust.json").write_bytes(canonical_bytes(trust_document(trust)) + b"\n")


@pytest.mark.timeout(sized(600, 3600))
def test_tamper_finding_battery(run_inproc, tmp_path, capsys, request):
    rng = random.Random(SEED + 7)
    failures: list[str] = []
    by_store: dict[str, Counter[str]] = {"file": Counter(), "postgres": Counter()}

    # --- the file store -----------------------------------------------------------------
    mixed = build_mixed_home(run_inproc, tmp_path / "mixed", tmp_path / "work")
    chain = load_chain(mixed.home)
    now = parse_ts(chain.ts(chain.n)) + dt.timedelta(seconds=30)
    file_cases = _cases(chain, rng, PER_KIND)
    for number, case in enumerate(file_cases):
        home = tmp_path / f"case-{number}"
        shutil.copytree(mixed.home, home)
        (home / "events.jsonl").write_bytes(b"".join(case.lines))
        if case.trust != chain.trust:
            _write_trust(home, case.trust)
        tally = by_store["file"]
        tally["cases"] += 1
        problem = _judge(run_inproc, home, case, now, tally)
        if problem:
            failures.append(f"file {case.kind} {case.note}: {problem}")
        shutil.rmtree(home)

    # --- PostgreSQL ---------------------------------------------------------------------
    pg_env = request.getfixturevalue("pg_store_env")
    server = request.getfixturevalue("pg_server")
    schema = pg_env["LEDGER_STORE_SCHEMA"]
    pg_home = tmp_path / "pg-home"
    pg_mixed = build_mixed_home(
        lambda args, env=None, stdin="": run_inproc(args, {**pg_env, **(env or {})}, stdin),
        pg_home, tmp_path / "pg-work", pairs=5,
    )  # fmt: skip
    pg_chain = _pg_chain(server, schema, pg_mixed.home)
    pg_now = parse_ts(pg_chain.ts(pg_chain.n)) + dt.timedelta(seconds=30)
    saved = _pg_save(server, schema)
    for case in _cases(pg_chain, rng, PG_PER_KIND):
        tally = by_store["postgres"]
        tally["cases"] += 1
        _pg_write(server, schema, case.lines, case.trust if case.trust != pg_chain.trust else None)
        try:
            problem = _judge(run_inproc, pg_home, case, pg_now, tally)
        finally:
            _pg_restore(server, schema, saved)
        if problem:
            failures.append(f"postgres {case.kind} {case.note}: {problem}")

    cases = sum(t["cases"] for t in by_store.values())
    figures = "; ".join(
        f"{store}: {t['fail-open']} fail-open of {t['cases']} verdicts after "
        f"{t['findings']} BROKEN findings"
        for store, t in by_store.items()
    )
    summary(
        capsys, "tamper-finding", cases - len(failures), len(failures),
        f"{len(KINDS)} tamper kinds; {figures}",
    )  # fmt: skip
    assert not failures, "\n".join(failures[:20])


# --- PostgreSQL: the chain table written by SQL, past the tamper note ----------------------


def _pg_chain(server: Any, schema: str, home: Path) -> Chain:
    rows = server.sql(f'SELECT line FROM "{schema}".chain ORDER BY seq')
    lines = [bytes(row[0]) for row in rows]
    document = bytes(server.sql(f'SELECT document FROM "{schema}".trust_store')[0][0])
    trust = trust_from_document(json.loads(document), source="store")
    newest = CheckpointDir(home / "checkpoints").newest()
    assert newest is not None
    entries = []
    for raw in lines:
        parsed = parse_line(raw.rstrip(b"\n"))
        entries.append(
            {**parsed.entry, "signature": parsed.signature, "signing_key_id": parsed.signing_key_id}
        )
    keys = KeyDir(home)
    signers = {key.key_id: keys.load_signer(key.key_id) for key in trust.keys}
    rotated = next(e["ts_utc"] for e in entries if e["event_type"] == "ledger.key_rotated")
    return Chain(lines, trust, newest[1], newest[0], signers, rotated, entries)


def _pg_save(server: Any, schema: str) -> dict[str, Any]:
    return {
        "chain": server.sql(
            f'SELECT seq, end_pos, entry_hash, ts_utc, event_type, line FROM "{schema}".chain'
        ),
        "state": server.sql(
            f'SELECT id, head_seq, head_hash, size, body FROM "{schema}".derived_state'
        ),
        "trust": server.sql(f'SELECT document FROM "{schema}".trust_store'),
    }


def _pg_rows(lines: list[bytes]) -> list[tuple[Any, ...]]:
    rows = []
    end = 0
    for seq, line in enumerate(lines, 1):
        end += len(line)
        try:
            parsed = parse_line(line.rstrip(b"\n"))
            meta = (parsed.entry_hash, parsed.ts_utc, parsed.event_type)
        except Exception:  # a marker or a flipped byte: the row holds it as it is
            meta = ("0" * 64, "", "")
        rows.append((seq, end, *meta, line))
    return rows


def _pg_replace(
    server: Any, schema: str, rows: list[tuple[Any, ...]], state: Any, trust: Any
) -> None:
    import psycopg

    with psycopg.connect(server.url, autocommit=False) as conn:
        conn.execute("SET LOCAL ledger.recovering = 'on'")
        conn.execute(f'DELETE FROM "{schema}".chain')
        for row in rows:
            conn.execute(
                f'INSERT INTO "{schema}".chain (seq, end_pos, entry_hash, ts_utc, event_type, line)'
                " VALUES (%s, %s, %s, %s, %s, %s)",
                row,
            )
        if state is not None:
            conn.execute(f'DELETE FROM "{schema}".derived_state')
            for values in state:
                conn.execute(
                    f'INSERT INTO "{schema}".derived_state (id, head_seq, head_hash, size, body)'
                    " VALUES (%s, %s, %s, %s, %s)",
                    values,
                )
        if trust is not None:
            conn.execute(f'UPDATE "{schema}".trust_store SET document = %s', (trust,))
        conn.commit()


def _pg_write(server: Any, schema: str, lines: list[bytes], trust: TrustStore | None) -> None:
    document = None if trust is None else canonical_bytes(trust_document(trust))
    _pg_replace(server, schema, _pg_rows(lines), None, document)


def _pg_restore(server: Any, schema: str, saved: dict[str, Any]) -> None:
    _pg_replace(server, schema, saved["chain"], saved["state"], bytes(saved["trust"][0][0]))
