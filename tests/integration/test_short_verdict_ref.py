"""`record --verdict-ref` takes a unique prefix of 12 or more hex digits, as `explain` does."""

NOW = {"LEDGER_NOW": "2026-03-02T10:00:00Z", "LEDGER_BILLING_STALE_HALT_PCT": "100"}


def _cli(run_inproc, home, *args: str):
    return run_inproc(["--home", str(home), *args], env=NOW)


def test_a_short_ref_settles_its_reservation(home, run_inproc):
    ref = _cli(run_inproc, home, "verdict", "2").json()["verdict_ref"]
    result = _cli(
        run_inproc, home, "record", "0.5", "--provider", "openai", "--verdict-ref", ref[:12]
    )
    assert result.code == 0, result.stderr
    document = result.json()
    assert (document["settled"], document["verdict_ref"]) == (True, ref)
    usage = _cli(run_inproc, home, "usage").json()
    assert (usage["usd_used_micros"], usage["usd_reserved_micros"]) == (500_000, 0)
    assert _cli(run_inproc, home, "explain", ref[:12]).code == 0


def test_a_prefix_naming_no_open_reservation_is_recorded_with_a_warning(home, run_inproc):
    args = ("record", "0.5", "--provider", "openai", "--verdict-ref", "0123456789ab")
    result = _cli(run_inproc, home, *args)
    assert result.code == 0
    assert result.json()["settled"] is False
    assert "names no open reservation; recorded anyway" in result.stderr
    too_short = _cli(
        run_inproc, home, "record", "0.5", "--provider", "openai", "--verdict-ref", "0123"
    )
    assert too_short.code == 2
    assert _cli(run_inproc, home, "usage").json()["usd_used_micros"] == 500_000


def test_a_prefix_of_a_settled_verdict_is_known_through_the_index(home, run_inproc):
    """A prefix naming no open reservation is looked up in the chain's refs: the warning
    is the one its whole ref gets, and the record names the whole ref."""
    ref = _cli(run_inproc, home, "verdict", "2").json()["verdict_ref"]
    args = ("record", "0.5", "--provider", "openai", "--verdict-ref")
    assert _cli(run_inproc, home, *args, ref).code == 0
    again = _cli(run_inproc, home, *args, ref[:12])
    whole = _cli(run_inproc, home, *args, ref)
    assert again.code == whole.code == 0
    assert again.stderr == whole.stderr
    assert "names no open reservation" not in again.stderr
    assert again.json()["verdict_ref"] == ref
