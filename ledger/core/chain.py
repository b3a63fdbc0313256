"""Chain verification over raw lines: JSON, link and signature, in that order.

``ChainVerifier`` is fed one line at a time so that a chain of any length is
verified in constant memory, and so that a long chain can be cut into ranges
verified side by side and then stitched (``stitch``).
"""

from collections.abc import Callable, Iterable
from typing import NamedTuple

from ledger.core.envelope import GENESIS, EnvelopeFormatError, ParsedEntry, parse_line
from ledger.core.trust import TrustStore


class ChainReport(NamedTuple):
    """The outcome of verifying lines; ``line`` names the first failing one.

    ``first_prev_hash`` is what the first entry links to: ``GENESIS`` for a whole
    chain, the previous range's head for a range.
    """

    ok: bool
    entries: int
    lines: int
    line: int | None = None
    reason: str | None = None
    first_prev_hash: str | None = None
    genesis_hash: str | None = None
    head_hash: str | None = None
    head_ts: str | None = None
    first_entry_line: int | None = None


class ChainVerifier:
    """Verifies lines in order, stopping at the first failure."""

    def __init__(
        self,
        trust: TrustStore,
        *,
        strict: bool = False,
        allow_markers: bool = False,
        expected_prev: str | None = GENESIS,
        first_line: int = 1,
        on_entry: Callable[[ParsedEntry], None] | None = None,
        vouched: Callable[[bytes], bool] | None = None,
    ) -> None:
        """Start verifying.

        Args:
            trust: keys that may sign.
            strict: every entry must be signed.
            allow_markers: skip lines beginning with ``[`` instead of failing them.
            expected_prev: what the first entry must link to; ``None`` accepts any
                link (a range whose predecessor another worker verifies).
            first_line: the line number of the first line fed.
            on_entry: called with each entry that verifies, in order (to fold
                derived state while verifying).
            vouched: whether the caller itself sealed exactly this line (its
                bytes without the newline): its link and its key's validity are
                checked, its Ed25519 signature is not checked again. For
                followers of their own chain only.
        """
        self._vouched = vouched
        self._on_entry = on_entry
        self._trust = trust
        self._strict = strict
        self._allow_markers = allow_markers
        self._expected_prev = expected_prev
        self._line_no = first_line - 1
        self._first_line = first_line
        self._entries = 0
        self._first_prev: str | None = None
        self._genesis: str | None = None
        self._head: str | None = None
        self._head_ts: str | None = None
        self._fail_line: int | None = None
        self._fail_reason: str | None = None
        self._first_entry_line: int | None = None

    @property
    def broken(self) -> bool:
        """Whether a line has failed."""
        return self._fail_line is not None

    def _fail(self, reason: str) -> bool:
        self._fail_line = self._line_no
        self._fail_reason = reason
        return False

    def feed(self, raw: bytes) -> bool:
        """Check the next line (with its ``\\n``); ``False`` once the chain is broken."""
        if self._fail_line is not None:
            return False
        self._line_no += 1
        if not raw.endswith(b"\n"):
            return self._fail("torn line (no newline at end of file)")
        line = raw[:-1]
        if line.startswith(b"["):
            if self._allow_markers:
                return True
            return self._fail("unauthenticated marker line")
        try:
            parsed = parse_line(line)
        except EnvelopeFormatError as exc:
            # A blank line never parses, so it is looked for only after a failure.
            if not line.strip():
                return self._fail("empty line")
            return self._fail(f"malformed entry: {exc}")
        return self._check(parsed, line)

    def _check(self, parsed: ParsedEntry, line: bytes) -> bool:
        prev = parsed.prev_hash
        if self._entries == 0:
            self._first_prev = prev
            self._first_entry_line = self._line_no
            if self._expected_prev is not None and prev != self._expected_prev:
                return self._fail(self._link_reason())
        elif prev != self._head:
            return self._fail("prev_hash does not match the previous entry")
        vouched = self._vouched is not None and self._vouched(line)
        problem = self._trust.signature_problem(parsed, strict=self._strict, vouched=vouched)
        if problem is not None:
            return self._fail(problem)
        if self._entries == 0 and prev == GENESIS:
            self._genesis = parsed.entry_hash
        self._entries += 1
        self._head = parsed.entry_hash
        self._head_ts = parsed.ts_utc
        if self._on_entry is not None:
            self._on_entry(parsed)
        return True

    def _link_reason(self) -> str:
        if self._expected_prev == GENESIS:
            return "first entry's prev_hash is not GENESIS"
        return "prev_hash does not match the previous entry"

    def report(self) -> ChainReport:
        """The result so far."""
        return ChainReport(
            ok=not self.broken,
            entries=self._entries,
            lines=self._line_no - self._first_line + 1,
            line=self._fail_line,
            reason=self._fail_reason,
            first_prev_hash=self._first_prev,
            genesis_hash=self._genesis,
            head_hash=self._head,
            head_ts=self._head_ts,
            first_entry_line=self._first_entry_line,
        )


def verify_lines(
    lines: Iterable[bytes],
    trust: TrustStore,
    *,
    strict: bool = False,
    allow_markers: bool = False,
) -> ChainReport:
    """Verify a whole chain given as raw lines (each with its ``\\n``)."""
    verifier = ChainVerifier(trust, strict=strict, allow_markers=allow_markers)
    for raw in lines:
        if not verifier.feed(raw):
            break
    return verifier.report()


def stitch(ranges: list[ChainReport]) -> ChainReport:
    """Join reports of consecutive ranges (the first verified from ``GENESIS``).

    Each range is verified with line numbers counting from 1; the joined report
    counts from the start of the whole chain. Each later range's first link must
    be the previous range's head; the first failure in line order wins.
    """
    entries = 0
    lines = 0
    head: str | None = None
    head_ts: str | None = None
    genesis: str | None = None
    for index, part in enumerate(ranges):
        # Before any entry (earlier ranges held only markers) the link is GENESIS.
        expected = head if head is not None else GENESIS
        linked = index == 0 or part.first_prev_hash is None or part.first_prev_hash == expected
        if not linked:
            return ChainReport(
                False, entries, lines, lines + (part.first_entry_line or 1),
                "prev_hash does not match the previous entry",
                None, genesis, head, head_ts,
            )  # fmt: skip
        if not part.ok:
            return ChainReport(
                False, entries + part.entries, lines + part.lines,
                lines + (part.line or 1),
                part.reason, None, genesis, head, head_ts,
            )  # fmt: skip
        if index == 0:
            genesis = part.genesis_hash
        if part.entries:
            head, head_ts = part.head_hash, part.head_ts
        entries += part.entries
        lines += part.lines
    return ChainReport(True, entries, lines, None, None, None, genesis, head, head_ts)
