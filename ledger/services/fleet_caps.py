"""``ledger config push``: a fleet's caps and budgets sealed in its store (SPEC §21).

The pushed ``[usd]`` and ``[[budgets]]`` are sealed as a ``config.changed``
entry of scope ``"fleet"``; every host decides under the newest such entry
(``edges.postgres.fleetconfig``), so a host that joins later has them at its
first verdict and no host's own ``ledger.toml`` can silently differ.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.core.sealed_config import CONFIG_CHANGED, SCOPE_FLEET, changed_payload
from ledger.services.chain.writer import Writer, WriterDeps


class PushDeps(WriterDeps, Protocol):
    """What pushing needs: the chain, its keys, and who pushes."""

    def operator_identity(self) -> tuple[str, str]:
        """The OS user and host pushing."""
        ...


@dataclass(frozen=True, slots=True)
class PushResult:
    """What ``config push`` did."""

    changed: bool
    entry_hash: str | None
    before: dict[str, Any] | None
    after: dict[str, Any]


def push_caps(
    deps: PushDeps,
    document: dict[str, Any],
    newest: Callable[[], tuple[dict[str, Any] | None, bool]],
) -> PushResult:
    """Seal ``document`` as the fleet's caps, unless the fleet already has exactly those.

    ``newest`` reads, under the chain lock, the newest sealed caps and whether
    they were pushed (a fleet whose hosts sealed their own caps is changed to
    pushed ones even when they are equal).

    Raises:
        ChainIOError, LockTimeoutError, KeyFileError: the store or the key failed.
    """
    writer = Writer(deps)
    with deps.chain.transaction() as tx:
        before, pushed = newest()
        if pushed and before == document:
            return PushResult(False, None, before, document)
        user, host = deps.operator_identity()
        payload = changed_payload(before, document, SCOPE_FLEET, user, host)
        entry = writer.append(tx, CONFIG_CHANGED, payload)
    return PushResult(True, entry.entry_hash, before, document)
