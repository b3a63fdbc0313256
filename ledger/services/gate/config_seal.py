"""Seal a change of caps or budgets before the first verdict decided under it (SPEC §21).

The derived state remembers the newest sealed ``config.changed`` document;
a verdict whose configuration differs from it seals the change first, in the
same transaction, with the OS user and host that decide under it. A fleet
host deciding under the store's pushed caps never seals them itself: a
difference there means the fleet's caps were pushed while this verdict was
being decided, and the verdict halts rather than decide under stale caps.
"""

from typing import Any

from ledger.core.config import Config
from ledger.core.sealed_config import (
    CAPS_SEEN,
    CONFIG_CHANGED,
    SCOPE_FLEET,
    SCOPE_HOST,
    caps_document,
    changed_payload,
    sealed_document,
)
from ledger.services.chain.state import fold_sealed
from ledger.services.chain.writer import Writer
from ledger.services.gate.deps import GateDeps

_PUSHED_MEANWHILE = (
    "the fleet's caps were pushed (`ledger config push`) while this verdict was decided; "
    "the next call decides under them"
)


# The document of the last configuration seen, by identity: a long-lived gate
# (``ledger serve``, the gateway) keeps one Config across its verdicts.
_LAST: list[tuple[Config, dict[str, Any]]] = []


def _document_of(config: Config) -> dict[str, Any]:
    if _LAST and _LAST[0][0] is config:
        return _LAST[0][1]
    document = caps_document(config)
    _LAST[:] = [(config, document)]
    return document


def seal_config_change(
    deps: GateDeps, writer: Writer, tx: Any, counter: Any, now: Any
) -> str | None:
    """Seal ``config.changed`` when the caps in force are not the ones decided under before.

    Until a home's first change, the caps its verdicts were decided under are
    kept in the derived state only (``meta.caps_seen``): a home whose caps
    never change seals nothing more than its verdicts. Returns why the
    verdict must halt instead (a fleet push seen only under the lock), or
    ``None``.
    """
    document = _document_of(deps.config)
    meta = counter.data["meta"]
    sealed, sealed_scope = sealed_document(counter.data)
    if sealed is None:
        seen = meta.get(CAPS_SEEN)
        if (seen is None or seen == document) and deps.caps_scope != SCOPE_FLEET:
            meta[CAPS_SEEN] = document
            return None
        before = seen
    elif sealed == document:
        return None
    else:
        before = sealed
    if SCOPE_FLEET in (deps.caps_scope, sealed_scope):
        return _PUSHED_MEANWHILE
    user, host = deps.operator_identity()
    payload = changed_payload(before, document, SCOPE_HOST, user, host)
    entry = writer.append(tx, CONFIG_CHANGED, payload, now=now)
    fold_sealed(counter, entry, tx.head())
    meta.pop(CAPS_SEEN, None)
    return None
