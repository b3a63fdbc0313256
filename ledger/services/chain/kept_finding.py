"""A finding kept in the derived state, read and described (see ``findings``).

Pure reads of the state's data, so the counter can check a finding without
depending on the module that verifies the chain and seals findings.
"""

from typing import Any

from ledger.core.state import FINDING_KEY


def finding_of(data: dict[str, Any]) -> dict[str, Any] | None:
    """The remembered finding in a derived state's data, or ``None``."""
    found = data.get("meta", {}).get(FINDING_KEY)
    return found if isinstance(found, dict) else None


def finding_problem(data: dict[str, Any]) -> str | None:
    """Why the gate must halt because of a remembered finding, or ``None``."""
    found = finding_of(data)
    return None if found is None else describe_finding(found)


def describe_finding(found: dict[str, Any]) -> str:
    """The finding as a diagnostic naming its line and the way out."""
    where = f"line {found.get('line')}" if found.get("line") is not None else "the chain"
    return (
        f"a full verification found the chain BROKEN at {where}: {found.get('reason')}; "
        "run `ledger recover`"
    )
