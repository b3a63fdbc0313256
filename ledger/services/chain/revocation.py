"""A revocation that fails no sealed entry keeps what was verified (SPEC §21).

A revoked key's signatures from ``revoked_at`` on stop counting, so in general
a state verified under the old trust store says nothing under the new one, and
the next verdict verified and folded the whole chain again while holding the
chain lock: minutes on a long home, every other verdict refused meanwhile. The
usual revocation is of a key a rotation retired (a lost laptop's, from the day
it was lost), and it fails no entry at all. ``revoke_key`` looks for an entry it
would fail: without the lock up to the head, then under the lock over the lines
appended since. When there is none, the derived state, its points, the rollups
and the verified mark are carried over to the new trust store, as after a
rotation; when there is one, they are left to the next reader, which verifies
afresh and finds the entry (the chain is then BROKEN, which is the point).
"""

from ledger.core.checkpoint import Checkpoint, checkpoint_signature_problem
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.trust import TrustStore
from ledger.errors import ChainIOError
from ledger.services.ports import ChainStore


def fails_an_entry(
    chain: ChainStore, revoked: TrustStore, key_id: str, start: int = 0, end: int | None = None
) -> bool:
    """Whether a line in ``[start, end)`` signed by ``key_id`` fails under ``revoked``.

    ``revoked`` is the trust store with the revocation; its own check decides
    (``TrustStore.signature_problem``, the Ed25519 check skipped: these lines
    verified before, and a revocation changes only when a key counts). Reads
    each line once, in constant memory, and parses only the lines that could
    name the key: a key id is ``[a-z0-9_-]`` only, so JSON can spell it as its
    own bytes or with ``\\u`` escapes, and a line holding neither cannot be
    signed by it. What cannot be told counts as failing (a line that does not
    parse, a part of the chain that cannot be read, such as segments moved
    away by ``ledger archive``): the caller then keeps nothing and the next
    reader judges the chain.
    """
    needle = key_id.encode("ascii")
    try:
        for line in chain.iter_lines(start, end):
            if needle not in line and b"\\u" not in line:
                continue
            parsed = parse_line(line.rstrip(b"\n"))
            if parsed.signing_key_id != key_id:
                continue
            if revoked.signature_problem(parsed, strict=False, vouched=True) is not None:
                return True
    except (EnvelopeFormatError, ChainIOError):
        return True
    return False


def fails_the_checkpoint(checkpoint: Checkpoint | None, revoked: TrustStore) -> bool:
    """Whether the newest checkpoint's signature stops counting under ``revoked``."""
    return checkpoint is not None and checkpoint_signature_problem(checkpoint, revoked) is not None


__all__ = ["fails_an_entry", "fails_the_checkpoint"]
