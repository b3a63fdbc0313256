"""ledger export --format ndjson|csv|focus and ledger verify-export (SPEC §19)."""

import csv
import datetime as dt
import io
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ledger.core.signing import Signer

NOW = {"LEDGER_NOW": "2026-03-10T00:00:00Z"}
RANGE = ["--from", "2026-03-01", "--to", "2026-03-31"]

# FinOps FOCUS 1.2: the columns a FOCUS dataset must have (feature level
# Mandatory, and Recommended ChargeFrequency), with their data types and
# whether they may be null; plus the conditional columns ledger fills.
FOCUS_REQUIRED = {
    "BilledCost": ("Decimal", False),
    "BillingAccountId": ("String", False),
    "BillingAccountName": ("String", True),
    "BillingCurrency": ("String", False),
    "BillingPeriodEnd": ("DateTime", False),
    "BillingPeriodStart": ("DateTime", False),
    "ChargeCategory": ("String", False),
    "ChargeClass": ("String", True),
    "ChargeDescription": ("String", True),
    "ChargeFrequency": ("String", False),
    "ChargePeriodEnd": ("DateTime", False),
    "ChargePeriodStart": ("DateTime", False),
    "ContractedCost": ("Decimal", False),
    "EffectiveCost": ("Decimal", False),
    "InvoiceIssuerName": ("String", False),
    "ListCost": ("Decimal", False),
    "PricingQuantity": ("Decimal", True),
    "PricingUnit": ("String", True),
    "ProviderName": ("String", False),
    "PublisherName": ("String", False),
    "ServiceCategory": ("String", False),
    "ServiceName": ("String", False),
    "ConsumedQuantity": ("Decimal", True),
    "ConsumedUnit": ("String", True),
    "ResourceId": ("String", True),
    "Tags": ("KeyValue", True),
}
CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
SERVICE_CATEGORIES = {"AI and Machine Learning", "Other"}
DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


@pytest.fixture
def spent(home: Path, run_inproc):
    """Three calls in March (one settling a verdict) and one in April."""

    def run(*args: str, now: str) -> dict[str, Any]:
        result = run_inproc(["--home", str(home), *args], {"LEDGER_NOW": now})
        assert result.code == 0, result.stderr
        return json.loads(result.stdout.splitlines()[-1]) if result.stdout else {}

    ref = run("verdict", "0.5", "--provider", "openai", "--agent", "coder",
              now="2026-03-02T09:00:00Z")["verdict_ref"]  # fmt: skip
    run("record", "0.25", "--provider", "openai", "--verdict-ref", ref, "--agent", "coder",
        "--model-id", "gpt-x", "--input-tokens", "100", "--output-tokens", "20",
        now="2026-03-02T09:00:05Z")  # fmt: skip
    run("record", "1.5", "--provider", "anthropic", "--tag", "team-a", "--tag", "team-b",
        "--key", "alice", "--model-id", "claude-y", now="2026-03-03T12:00:00Z")  # fmt: skip
    run("record", "0.000001", "--provider", "anthropic", "--cycle-id", 's,1"x',
        now="2026-03-31T23:59:59Z")  # fmt: skip
    run("record", "9", "--provider", "openai", now="2026-04-01T00:00:01Z")
    return home


def _export(run_inproc, home: Path, fmt: str) -> str:
    result = run_inproc(["--home", str(home), "export", "--format", fmt, *RANGE], NOW)
    assert result.code == 0, result.stderr
    return str(result.stdout)


def test_ndjson_rows_join_verdict_and_record_and_the_manifest_verifies(spent, run_inproc, tmp_path):
    text = _export(run_inproc, spent, "ndjson")
    lines = text.splitlines(keepends=True)
    rows = [json.loads(line) for line in lines[:-1]]
    assert [row["usd_micros"] for row in rows] == [250_000, 1_500_000, 1]
    first = rows[0]
    assert (first["verdict"], first["estimated_usd"], first["agent"], first["model"]) == (
        "allow", "0.500000", "coder", "gpt-x")  # fmt: skip
    assert (first["input_tokens"], first["output_tokens"]) == (100, 20)
    assert rows[1]["tags"] == ["team-a", "team-b"]
    assert rows[1]["key"] == "alice"
    manifest = json.loads(lines[-1])["_manifest"]
    assert manifest["rows"] == 3
    assert (manifest["from"], manifest["to"]) == (
        "2026-03-01",
        "2026-03-31",
    )
    path = tmp_path / "march.ndjson"
    path.write_text(text)
    result = run_inproc(["--home", str(spent), "verify-export", str(path)], NOW)
    assert result.code == 0, result.stderr
    assert result.json()["ok"] is True
    assert result.json()["in_chain"] is True
    # With only the public key (an auditor without the home): the manifest still verifies.
    key = next((spent / "keys").glob("*.pub.pem"), None) or next((spent / "keys").glob("*pub*"))
    result = run_inproc(["verify-export", str(path), "--key", str(key)], NOW)
    assert result.code == 0, result.stderr
    assert result.json()["in_chain"] is None


def _edits(lines: list[str]) -> dict[str, list[str]]:
    rows, manifest = lines[:-1], lines[-1]
    edited = json.loads(rows[1])
    edited["usd_micros"] += 1
    return {
        "edited": [rows[0], json.dumps(edited, separators=(",", ":")) + "\n", *rows[2:], manifest],
        "removed": [rows[0], *rows[2:], manifest],
        "reordered": [rows[1], rows[0], *rows[2:], manifest],
        "added": [*rows, rows[0], manifest],
    }


@pytest.mark.parametrize("change", ["edited", "removed", "reordered", "added"])
def test_any_changed_row_fails_verify_export(spent, run_inproc, tmp_path, change):
    lines = _export(run_inproc, spent, "ndjson").splitlines(keepends=True)
    path = tmp_path / "changed.ndjson"
    path.write_text("".join(_edits(lines)[change]))
    result = run_inproc(["--home", str(spent), "verify-export", str(path)], NOW)
    assert result.code == 1
    assert result.json()["ok"] is False
    assert result.stderr.startswith("ledger: export does not verify: ")


def test_a_resigned_manifest_over_rows_missing_from_the_chain_fails_on_the_home(
    spent, run_inproc, tmp_path
):
    """Rows dropped and the manifest honestly re-made still fail: the chain has them."""
    full = _export(run_inproc, spent, "ndjson").splitlines(keepends=True)
    # An export of March 3 alone is honest, but glued to March 31's row it is not whole.
    part = run_inproc(["--home", str(spent), "export", "--format", "ndjson", "--from",
                       "2026-03-02", "--to", "2026-03-02"], NOW).stdout  # fmt: skip
    assert len(part.splitlines()) == 2
    assert full[0] == part.splitlines(keepends=True)[0]
    lines = [full[0], full[2]]
    from ledger.core.canonical import canonical_bytes
    from ledger.runtime import build_runtime

    runtime = build_runtime(str(spent))
    signer: Signer = runtime.keys.active_signer(runtime.keys.load_trust())
    import hashlib

    body = json.loads(full[-1])["_manifest"]
    body.pop("signature")
    body.update(rows=2, sha256=hashlib.sha256("".join(lines).encode()).hexdigest())
    body["signature"] = signer.sign_b64(canonical_bytes(body))
    path = tmp_path / "gapped.ndjson"
    path.write_text("".join(lines) + json.dumps({"_manifest": body}) + "\n")
    result = run_inproc(["--home", str(spent), "verify-export", str(path)], NOW)
    assert result.code == 1, result.stdout
    assert result.json()["in_chain"] is False


@pytest.mark.parametrize("content", [None, b"", b"not json\n", b'{"rows": 1}\n'])
def test_an_unreadable_export_exits_65(home, run_inproc, tmp_path, content):
    path = tmp_path / "bad.ndjson"
    if content is not None:
        path.write_bytes(content)
    result = run_inproc(["--home", str(home), "verify-export", str(path)], NOW)
    assert result.code == 65, result.stderr
    assert result.stderr.startswith("ledger: ")


def test_csv_opens_as_is_one_row_per_call(spent, run_inproc):
    text = _export(run_inproc, spent, "csv")
    table = list(csv.DictReader(io.StringIO(text)))
    assert [row["usd"] for row in table] == ["0.250000", "1.500000", "0.000001"]
    assert table[2]["session"] == 's,1"x'
    assert table[1]["tags"] == "team-a;team-b"
    for row in table:
        dt.datetime.fromisoformat(row["ts_utc"])
        dt.date.fromisoformat(row["day"])


def _check_focus_cell(name: str, kind: str, nullable: bool, value: str) -> None:
    if value == "":
        assert nullable, f"{name} may not be null"
        return
    if kind == "Decimal":
        assert Decimal(value).is_finite(), name
    elif kind == "DateTime":
        assert DATETIME.fullmatch(value), f"{name}: {value!r}"
    elif kind == "KeyValue":
        tags = json.loads(value)
        assert isinstance(tags, dict), name
        assert all(isinstance(v, str) for v in tags.values()), name
    else:
        assert isinstance(value, str), name


def test_focus_columns_follow_the_specification(spent, run_inproc):
    table = list(csv.DictReader(io.StringIO(_export(run_inproc, spent, "focus"))))
    assert len(table) == 3
    header = list(table[0])
    for name, (kind, nullable) in FOCUS_REQUIRED.items():
        assert name in header, f"{name} missing"
        for row in table:
            _check_focus_cell(name, kind, nullable, row[name])
    extra = [name for name in header if name not in FOCUS_REQUIRED]
    assert all(name.startswith("x_") or name[0].isupper() for name in extra)
    for row in table:
        assert row["ChargeCategory"] in CHARGE_CATEGORIES
        assert row["ServiceCategory"] in SERVICE_CATEGORIES
        assert row["BillingCurrency"] == "USD"
        assert row["ChargePeriodStart"] < row["ChargePeriodEnd"]
        assert row["BillingPeriodStart"] <= row["ChargePeriodStart"]
        assert row["ChargePeriodEnd"] <= row["BillingPeriodEnd"]
        assert row["BilledCost"] == row["EffectiveCost"]
    assert sum(Decimal(row["BilledCost"]) for row in table) == Decimal("1.750001")
    assert json.loads(table[1]["Tags"]) == {"key": "alice", "tags": "team-a,team-b"}


def test_plain_export_still_writes_the_raw_chain_and_options_need_format(spent, run_inproc):
    raw = run_inproc(["--home", str(spent), "export"], NOW)
    assert raw.stdout == (spent / "events.jsonl").read_text()
    alone = run_inproc(["--home", str(spent), "export", *RANGE], NOW)
    assert alone.code == 2
    bad = run_inproc(["--home", str(spent), "export", "--format", "xml", *RANGE], NOW)
    assert bad.code == 2
    assert "--format" in bad.stderr
