"""What ``ledger init``'s options mean for a home that may already exist.

``init`` never rewrites an existing ``ledger.toml``: an option that disagrees
with it is refused, naming the key to change, rather than silently ignored.
"""

from fractions import Fraction
from pathlib import Path

from ledger.core.config import Config
from ledger.core.config_template import BILLING_NONE
from ledger.core.units import usd_text, usd_to_micros
from ledger.errors import ConfigError, UsageError

# Verdicts near a cap trust only the bill unless the home counts its own records.
_OWN_RECORDS_ONLY = Fraction(100)


def checked_cap(daily_cap_usd: str | None) -> int | None:
    """``--daily-cap-usd`` in micro-USD, or ``None`` when not given.

    Raises:
        UsageError: not a number ≥ 0.
    """
    if daily_cap_usd is None:
        return None
    try:
        cap = usd_to_micros(daily_cap_usd)
    except ValueError as exc:
        raise UsageError(f"--daily-cap-usd: {exc}") from exc
    if cap < 0:
        raise UsageError("--daily-cap-usd: must be ≥ 0")
    return cap


def checked_billing(billing: str | None) -> str | None:
    """``--billing``: ``none`` (ledger's own records only) or not given.

    Raises:
        UsageError: any other value.
    """
    if billing is None or billing == BILLING_NONE:
        return billing
    raise UsageError(
        f"--billing: {billing!r} is not a choice; give `none` (ledger's own records only), "
        "or configure a billing observer as [observer] command in ledger.toml"
    )


def refuse_changes_to_existing(
    config: Config, config_path: Path, daily_cap_usd: str | None, billing: str | None
) -> None:
    """Refuse ``init`` options that disagree with the config the home already has.

    The same cap (or ``--billing none`` where it is already chosen) is no change.

    Raises:
        UsageError: an option is malformed.
        ConfigError: an option asks for something else than the config says.
    """
    cap = checked_cap(daily_cap_usd)
    if cap is not None and cap != config.daily_cap_micros:
        current = config.daily_cap_micros
        has = "no daily cap" if current is None else f"a daily cap of {usd_text(current)}"
        raise ConfigError(
            f"this home already has {has}: change usd.daily_cap in {config_path} "
            f"(--daily-cap-usd {daily_cap_usd} was not applied)"
        )
    if checked_billing(billing) == BILLING_NONE and config.stale_halt_pct < _OWN_RECORDS_ONLY:
        raise ConfigError(
            f"this home has billing.stale_halt_pct = {float(config.stale_halt_pct):g}: set it "
            f"to 100 in {config_path} to count ledger's own records only "
            "(--billing none was not applied)"
        )


def billing_notice(config: Config) -> str | None:
    """The line ``init`` prints when verdicts will halt near a cap for want of a bill."""
    if config.observer_command is not None or config.stale_halt_pct >= _OWN_RECORDS_ONLY:
        return None
    return (
        "no billing observer: verdicts halt (halt-uncertainty billing_stale) above "
        f"{float(config.stale_halt_pct):g}% of a cap until one is configured ([observer] "
        "command in ledger.toml), or choose `ledger init --billing none` "
        "(billing.stale_halt_pct = 100: ledger's own records only)"
    )


def billing_source(config: Config) -> dict[str, object]:
    """Where the bill verdicts trust near a cap comes from, as ``status`` shows it.

    ``polling``: an observer the daemon runs every ``billing.poll_seconds``;
    ``observer``: one that runs only when a verdict needs a fresh reading;
    ``none``: no observer, so verdicts either halt above ``stale_halt_pct`` or,
    at 100, count ledger's own records only.
    """
    if config.observer_command is None:
        source = "none"
    elif config.poll_seconds > 0:
        source = "polling"
    else:
        source = "observer"
    return {
        "source": source,
        "stale_halt_pct": float(config.stale_halt_pct),
        "own_records_only": source == "none" and config.stale_halt_pct >= _OWN_RECORDS_ONLY,
    }


def billing_line(billing: dict[str, object]) -> str:
    """``status``'s line for people about the billing source."""
    source, pct = billing["source"], f"{billing['stale_halt_pct']:g}%"
    if source != "none":
        return f"Billing: {source} (verdicts above {pct} of a cap need a fresh reading)"
    if billing["own_records_only"]:
        return "Billing: none (ledger's own records only)"
    return (
        f"Billing: none (verdicts halt above {pct} of a cap: configure an [observer] "
        "or choose `ledger init --billing none`)"
    )
