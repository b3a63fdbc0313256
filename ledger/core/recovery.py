"""Recovery plans as pure values (SPEC §5, Recover).

``plan_recovery`` computes the longest valid prefix from the lines of a damaged
chain and, optionally, a verified snapshot: the snapshot's entries, then every
line of the damaged file from the one linking to the snapshot's head onward for
as long as the lines chain and verify. Without a snapshot it is the damaged
file's own longest verifying prefix.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.core.chain import ChainReport, ChainVerifier
from ledger.core.chain_check import feed_lines, line_hash
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.snapshot_check import VerifiedSnapshot
from ledger.core.trust import TrustStore


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What a recovery restores and what it loses.

    ``lost_lines`` counts lines of the damaged file that are not in the restored
    chain (a tampered line replaced by the snapshot's original counts as lost:
    its bytes survive only in the evidence file).
    """

    lines: tuple[bytes, ...]
    entries: int
    base_entries: int
    head_hash: str | None
    genesis_hash: str | None
    damaged_lines: int
    lost_lines: int
    first_lost_line: int | None
    reason: str | None
    damaged: ChainReport
    # The damaged file's last line (from 1) the restored chain holds; 0 for none.
    last_kept_line: int = 0


def _link_start(damaged: Sequence[bytes], head: str) -> int | None:
    """The index of the first line that parses and links to ``head``."""
    for index, raw in enumerate(damaged):
        if not raw.endswith(b"\n") or raw.startswith(b"["):
            continue
        try:
            parsed = parse_line(raw[:-1])
        except EnvelopeFormatError:
            continue
        if parsed.prev_hash == head:
            return index
    return None


def plan_recovery(
    damaged: Sequence[bytes],
    trust: TrustStore,
    base: VerifiedSnapshot | None = None,
) -> RecoveryPlan:
    """The longest valid prefix of a damaged chain, on top of a verified snapshot.

    Args:
        damaged: the damaged file's raw lines (the last may be torn).
        trust: the home's trust store.
        base: a snapshot that verified, or ``None``.

    Returns:
        With ``base``: the snapshot's lines, then the damaged file's lines from
        the first one that links to the snapshot's head, for as long as they
        chain and verify. Without: the damaged file's longest verifying prefix.
    """
    damaged_report = feed_lines(ChainVerifier(trust), damaged)
    restored: list[bytes] = list(base.lines) if base is not None else []
    kept: set[int] = set()
    continuation: ChainReport | None = None
    if base is None:
        count = damaged_report.entries
        restored.extend(damaged[:count])
        kept.update(range(1, count + 1))
        head = damaged_report.head_hash
    else:
        available = Counter(base.lines)
        for number, raw in enumerate(damaged, start=1):
            if available[raw] > 0:
                available[raw] -= 1
                kept.add(number)
        head = base.checkpoint.head_hash
        start = _link_start(damaged, head)
        if start is not None:
            verifier = ChainVerifier(trust, expected_prev=head, first_line=start + 1)
            continuation = feed_lines(verifier, damaged[start:], first_line=start + 1)
            taken = damaged[start : start + continuation.entries]
            restored.extend(taken)
            kept.update(range(start + 1, start + 1 + len(taken)))
            head = continuation.head_hash or head
    lost = [number for number in range(1, len(damaged) + 1) if number not in kept]
    first_lost = lost[0] if lost else None
    return RecoveryPlan(
        lines=tuple(restored),
        entries=len(restored),
        base_entries=len(base.lines) if base is not None else 0,
        head_hash=head if restored else None,
        genesis_hash=line_hash(restored[0]) if restored else None,
        damaged_lines=len(damaged),
        lost_lines=len(lost),
        first_lost_line=first_lost,
        reason=_lost_reason(first_lost, damaged_report, continuation),
        damaged=damaged_report,
        last_kept_line=max(kept, default=0),
    )


def _lost_reason(
    line: int | None, damaged: ChainReport, continuation: ChainReport | None
) -> str | None:
    """Why line ``line`` of the damaged file was not restored."""
    if line is None:
        return None
    if continuation is not None and not continuation.ok and continuation.line == line:
        return continuation.reason
    if not damaged.ok and damaged.line == line:
        return damaged.reason
    return "not part of the restored chain (not in the snapshot, not linked to its head)"


__all__ = ["RecoveryPlan", "plan_recovery"]
