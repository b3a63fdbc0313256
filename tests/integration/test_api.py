"""The Python API (SPEC §7): one code path with the CLI, light to import."""

import json
import subprocess
import sys

import pytest

import ledger
from tests.gate_helpers import env_at, events_of

PRICES = '\n[prices."anthropic/test-model"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n'


@pytest.fixture
def book(home, monkeypatch):
    for key, value in env_at().items():
        monkeypatch.setenv(key, value)
    path = home / "ledger.toml"
    path.write_text(path.read_text() + PRICES)
    return ledger.open(home=home)


def test_import_ledger_imports_nothing_heavy():
    code = (
        "import json, sys; import ledger; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('ledger', 'crypt', "
        "'typing', 'genai', 'pydantic', 'httpx')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["ledger"]


def test_lazy_names_resolve_and_unknown_ones_do_not():
    assert issubclass(ledger.BudgetHalted, ledger.LedgerError)
    assert ledger.UnknownPriceError.exit_code == 2
    with pytest.raises(AttributeError):
        _ = ledger.no_such_name


def test_verdict_fields_are_the_cli_fields(book, run_inproc, home):
    v = book.verdict(0.25, provider="anthropic")
    assert v.verdict == "allow"
    assert v.allowed is True
    # The typed outcome equals the printed text, as the Python page says.
    assert v.kind is ledger.VerdictKind.ALLOW
    assert v.kind == v.verdict
    assert v.kind.admits
    assert not v.kind.halts
    assert v.estimated_micros == 250_000
    cli = run_inproc(["--home", str(home), "verdict", "0.25", "--provider", "anthropic"], env_at())
    assert set(v.as_dict()) == set(cli.json())


def test_verdict_from_tokens(book):
    v = book.verdict(provider="anthropic", model="test-model", input_tokens=1000,
                     max_output_tokens=100)  # fmt: skip
    assert (v.estimated_micros, v.model, v.price_source) == (4_500, "test-model", "config")


def test_record_from_a_usage_object_is_idempotent(book, home):
    usage = {"input_tokens": 1000, "output_tokens": 100}
    first = book.record(provider="anthropic", model="test-model", usage=usage,
                        idempotency_key="req-1")  # fmt: skip
    again = book.record(provider="anthropic", model="test-model", usage=usage,
                        idempotency_key="req-1")  # fmt: skip
    assert first.actual_micros == 4_500
    assert (first.duplicate, again.duplicate) == (False, True)
    assert len(events_of(home, "budget.record_call")) == 1
    assert book.usage().usd_used_micros == 4_500
    assert book.usage(provider="anthropic").provider == "anthropic"


def test_errors_carry_the_cli_exit_code(book):
    with pytest.raises(ledger.UnknownPriceError) as caught:
        book.verdict(provider="anthropic", model="nope", input_tokens=1, max_output_tokens=1)
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith("no price for anthropic/nope: ")
    with pytest.raises(ledger.UsageError):
        book.record(-1, provider="anthropic")


def test_guard_records_once_with_a_key_and_settles(book, home):
    with book.guard(provider="anthropic", model="test-model", input_tokens=1000,
                    max_output_tokens=100) as call:  # fmt: skip
        record = call.record(usage={"input_tokens": 900, "output_tokens": 50})
        repeat = call.record(usage={"input_tokens": 900, "output_tokens": 50})
    assert record.settled is True
    assert record.idempotency_key == f"guard:{call.verdict.verdict_ref}"
    assert repeat.duplicate is True
    assert book.usage().usd_reserved_micros == 0
    assert book.usage().usd_used_micros == 900 * 3 + 50 * 15


def test_guard_halt_raises_and_never_enters(book, home, monkeypatch):
    monkeypatch.setenv("LEDGER_USD_DAILY_CAP", "0.001")
    entered = False
    with pytest.raises(ledger.BudgetHalted) as caught:
        with ledger.open(home).guard(provider="anthropic", estimate_usd=1):
            entered = True
    assert not entered
    assert caught.value.verdict.verdict == "halt-100"
    assert caught.value.exit_code == 1


def test_guard_warns_at_warn_90_as_the_sdk_guards_do(book, home, monkeypatch):
    monkeypatch.setenv("LEDGER_USD_DAILY_CAP", "1")
    monkeypatch.setenv("LEDGER_BILLING_STALE_HALT_PCT", "100")
    with pytest.warns(ledger.BudgetWarning, match="warn-90: 95"):
        with ledger.open(home).guard(provider="anthropic", estimate_usd="0.95") as call:
            entered = True
    assert entered
    assert call.verdict is not None
    assert call.verdict.verdict == "warn-90"
    assert call.verdict.kind is ledger.VerdictKind.WARN_90
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ledger.BudgetWarning)
        ran = False
        with pytest.raises(ledger.BudgetWarning):
            with ledger.open(home).guard(provider="anthropic", estimate_usd="0.01"):
                ran = True
        assert not ran


def test_leaving_the_guard_without_record_records_nothing(book, home):
    with book.guard(provider="anthropic", estimate_usd="0.10"):
        pass
    assert events_of(home, "budget.record_call") == []
    assert book.usage().usd_reserved_micros == 100_000  # expires by its TTL
