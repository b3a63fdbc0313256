"""A chain held as raw lines, checked the way ``verify-chain`` checks the home's chain.

Snapshots store their chain as bytes, and recovery starts from the bytes of a
damaged file, so both need the same steps over raw lines: split them as SPEC §2
does, hash one line, feed lines to a ``ChainVerifier`` without letting a damaged
line raise, and hold a verified chain to a checkpoint. The services use the same
steps to refuse a snapshot of a chain that does not verify.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledger.core.chain import ChainReport, ChainVerifier
from ledger.core.checkpoint import (
    Checkpoint,
    checkpoint_signature_problem,
    compare_with_checkpoint,
)
from ledger.core.envelope import EnvelopeFormatError, parse_line
from ledger.core.trust import TrustStore


def split_lines(data: bytes) -> list[bytes]:
    """Raw lines, each with its ``\\n``; a last line without one (torn) is kept as is.

    Only ``\\n`` ends a line (SPEC §2), unlike ``bytes.splitlines``.
    """
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


@dataclass(frozen=True, slots=True)
class ChainCheck:
    """A chain verified the way ``verify-chain`` verifies the home's chain."""

    ok: bool
    entries: int
    line: int | None
    reason: str | None
    head_hash: str | None
    genesis_hash: str | None
    head_ts: str | None = None


def line_hash(raw: bytes) -> str | None:
    """The entry hash of a complete line, or ``None`` if it is torn or malformed."""
    if not raw.endswith(b"\n"):
        return None
    try:
        return parse_line(raw[:-1]).entry_hash
    except EnvelopeFormatError:
        return None


def feed_lines(verifier: ChainVerifier, lines: Iterable[bytes], first_line: int = 1) -> ChainReport:
    """Feed ``lines`` (numbered from ``first_line``) until one fails; the report.

    A line whose ``ts_utc`` has the right shape but is no calendar time (month
    13) makes ``feed`` raise ``ValueError`` instead of failing the line; here it
    fails that line, so that a damaged chain can never crash a recovery.
    """
    for raw in lines:
        try:
            if not verifier.feed(raw):
                break
        except ValueError as exc:
            report = verifier.report()
            return ChainReport(
                ok=False,
                entries=report.entries,
                lines=report.lines,
                line=first_line + report.lines - 1,
                reason=f"malformed entry: {exc}",
                first_prev_hash=report.first_prev_hash,
                genesis_hash=report.genesis_hash,
                head_hash=report.head_hash,
                head_ts=report.head_ts,
                first_entry_line=report.first_entry_line,
            )
    return verifier.report()


def check_chain(
    lines: Sequence[bytes], trust: TrustStore, checkpoint: Checkpoint | None = None
) -> ChainCheck:
    """Verify every line (JSON, link, signature), then hold the chain to ``checkpoint``.

    Markers are not allowed: this is the home's own chain, which never holds them.
    """
    report = feed_lines(ChainVerifier(trust), lines)
    if not report.ok:
        return ChainCheck(False, report.entries, report.line, report.reason, None, None)
    if checkpoint is not None:
        problem = checkpoint_signature_problem(checkpoint, trust)
        if problem is not None:
            return ChainCheck(False, report.entries, None, problem, None, None)
        hash_at_count = None
        if report.entries >= checkpoint.entries:
            hash_at_count = line_hash(lines[checkpoint.entries - 1])
        departure = compare_with_checkpoint(report, checkpoint, hash_at_count)
        if departure is not None:
            line, reason = departure
            return ChainCheck(False, report.entries, line, reason, None, None)
    return ChainCheck(
        True, report.entries, None, None, report.head_hash, report.genesis_hash, report.head_ts
    )


def checkpoint_fits(checkpoint: Checkpoint, lines: Sequence[bytes], trust: TrustStore) -> bool:
    """Whether a verified chain of ``lines`` satisfies ``checkpoint``.

    It does when the checkpoint's signature counts and the chain holds the
    checkpoint's first entry and its entry number ``entries`` (SPEC §2,
    Truncation); a checkpoint that does not fit would fail ``verify-chain``.
    """
    if checkpoint_signature_problem(checkpoint, trust) is not None:
        return False
    if not lines or checkpoint.entries > len(lines):
        return False
    return (
        line_hash(lines[0]) == checkpoint.chain_id
        and line_hash(lines[checkpoint.entries - 1]) == checkpoint.head_hash
    )


__all__ = [
    "ChainCheck",
    "check_chain",
    "checkpoint_fits",
    "feed_lines",
    "line_hash",
    "split_lines",
]
