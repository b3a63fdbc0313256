"""ledger: a tamper-evident, fail-closed spend guard for autonomous agents."""

__version__ = "0.1.0"
