"""ledger: a tamper-evident, fail-closed spend guard for autonomous agents.

The Python API (``ledger.open``, ``Ledger``, ``BudgetHalted``, ``LedgerError``)
is bound lazily, so ``import ledger`` costs almost nothing and the per-call
commands pay nothing for it.
"""

__version__ = "0.1.0"

# typing is not imported at run time (``import ledger`` stays cheap); type
# checkers see the real names.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.api import BudgetHalted, Guard, Ledger, Record, Usage, Verdict, VerdictKind
    from ledger.api import open_book as open  # noqa: A004 - SPEC §7 names it ledger.open
    from ledger.errors import (
        BudgetWarning,
        ConfigError,
        LedgerError,
        UnknownPriceError,
        UnknownProviderError,
        UsageError,
    )

_LAZY = {
    "open": ("ledger.api", "open_book"),
    "Ledger": ("ledger.api", "Ledger"),
    "Verdict": ("ledger.api", "Verdict"),
    "Record": ("ledger.api", "Record"),
    "Usage": ("ledger.api", "Usage"),
    "Guard": ("ledger.api", "Guard"),
    "VerdictKind": ("ledger.core.verdict_kind", "Verdict"),
    "BudgetHalted": ("ledger.api", "BudgetHalted"),
    "BudgetWarning": ("ledger.errors", "BudgetWarning"),
    "LedgerError": ("ledger.errors", "LedgerError"),
    "UsageError": ("ledger.errors", "UsageError"),
    "UnknownPriceError": ("ledger.errors", "UnknownPriceError"),
    "UnknownProviderError": ("ledger.errors", "UnknownProviderError"),
    "ConfigError": ("ledger.errors", "ConfigError"),
}

__all__ = [  # names bound lazily by __getattr__
    "BudgetHalted",
    "BudgetWarning",
    "ConfigError",
    "Guard",
    "Ledger",
    "LedgerError",
    "Record",
    "UnknownPriceError",
    "UnknownProviderError",
    "Usage",
    "UsageError",
    "Verdict",
    "VerdictKind",
    "__version__",
    "open",
]


def __getattr__(name: str) -> object:
    """Bind a public name on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    import importlib

    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
