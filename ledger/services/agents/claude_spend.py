"""Claude Code spend: a session's transcript recorded, each call once.

``record_transcript`` (PostToolUse and Stop) reads the transcript from where
the previous read stopped, prices each new call from its own usage object and
records it with the same service as ``ledger record --model --usage-json``:
provider ``anthropic``, ``cycle_id`` the session id, idempotency key
``anthropic:<message id>`` (the key the gateway and the SDK guard give the same
response), so reading a transcript twice, or beside the gateway, never counts a
call twice.
Reading stays O(new lines): a cursor per transcript (derived, see
``ledger.edges.transcripts``) holds the offset, a hash of the line before it
(a transcript rewritten in place is read again from the start), the count and
cost of the session's calls, and the refs of the session's open verdicts
(``ledger.services.agents.session_gate``), each settled by the next call recorded.
"""

import hashlib
from bisect import bisect_left
from typing import Any, NamedTuple, Protocol

from ledger.core.hook_protocol import HookInput, clip
from ledger.core.prices import TokenCounts
from ledger.core.transcript import (
    Skipped,
    TranscriptCall,
    call_key,
    cursor_from,
    fresh_cursor,
    fuller,
    read_line,
    still_owed,
    tokens_from_payload,
    top_up_key,
    usage_object,
)
from ledger.errors import InputDataError, LedgerError
from ledger.services.gate import calls
from ledger.services.ports import TranscriptReader, TranscriptStore

PROVIDER = "anthropic"
TAIL_BYTES = 4096
_SHOWN_SKIPS = 3


class SpendDeps(calls.CallDeps, Protocol):
    """What recording a session's spend needs: the per-call requests and transcripts."""

    @property
    def transcripts(self) -> TranscriptStore:
        """Transcripts and their cursors."""
        ...


class SpendReport(NamedTuple):
    """What one read of a transcript did."""

    recorded: int = 0
    duplicates: int = 0
    skipped: tuple[str, ...] = ()
    unpriced: tuple[str, ...] = ()
    problem: str | None = None
    # Spend was found that could not be recorded (not merely an unreadable transcript).
    unrecorded: bool = False

    def stderr_line(self) -> str | None:
        """One line for stderr about what was skipped or not recorded, if anything."""
        parts = []
        if self.problem is not None:
            parts.append(f"{self.problem}; nothing more recorded")
        if self.skipped:
            shown = "; ".join(self.skipped[:_SHOWN_SKIPS])
            more = len(self.skipped) - _SHOWN_SKIPS
            parts.append(
                f"skipped {len(self.skipped)} transcript line(s) ({shown}"
                f"{f'; {more} more' if more > 0 else ''})"
            )
        if self.unpriced:
            parts.append(
                f"recorded {len(self.unpriced)} call(s) without a price "
                f"({', '.join(sorted(set(self.unpriced)))}): verdicts halt until priced"
            )
        return "claude code spend: " + "; ".join(parts) if parts else None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _resume_at(cursor: dict[str, Any], transcript: TranscriptReader) -> int:
    """Where to read from: the cursor's offset if the transcript still ends that prefix."""
    offset, tail = cursor["offset"], cursor["tail"]
    if offset == 0 or offset > transcript.size or tail is None or tail["start"] >= offset:
        restart = offset != 0
    else:
        held = transcript.read_at(tail["start"], offset - tail["start"])
        restart = _digest(held) != tail["sha256"] or not held.endswith(b"\n")
    if restart:  # rewritten, truncated or unknown: read it all again (keys keep it exact)
        cursor.update(fresh_cursor())
        return 0
    return int(offset)


class _Scan(NamedTuple):
    calls: list[tuple[int, TranscriptCall]]  # (start of its first line, its fullest line)
    skipped: list[str]
    starts: list[int]  # the start of every line read, in order
    end: int  # just after the last complete line read
    held: int | None  # start of a call that may still be growing (not recorded yet)
    partial: tuple[int, int, bool] | None  # a last line without "\n" (see TranscriptReader)


def _oversized_from(cursor: dict[str, Any], offset: int) -> int | None:
    """How far the too-long line at ``offset`` was read already, if it was."""
    partial = cursor.get("partial")
    if isinstance(partial, dict) and partial.get("start") == offset:
        scanned = partial.get("scanned")
        return scanned if isinstance(scanned, int) and scanned > offset else None
    return None


def _scan(
    transcript: TranscriptReader, offset: int, oversized_from: int | None, *, final: bool
) -> _Scan:
    groups: dict[tuple[str, str | None], tuple[int, TranscriptCall]] = {}
    skipped: list[str] = []
    starts: list[int] = []
    end = offset
    last: tuple[str, str | None] | None = None
    for start, line_end, raw in transcript.lines(offset, oversized_from):
        starts.append(start)
        end = line_end
        line = Skipped("line too long to read") if raw is None else read_line(raw)
        last = None
        if isinstance(line, Skipped):
            skipped.append(f"byte {start}: {line.reason}")
        elif isinstance(line, TranscriptCall):
            last = line.identity
            first = groups.get(line.identity)
            groups[line.identity] = (
                (start, line) if first is None else (first[0], fuller(first[1], line))
            )
    held = None
    if not final and last is not None:
        # The newest line is a call with nothing written after it: its usage
        # may not be final yet. It is read again next time (PostToolUse) or
        # recorded as it stands when the turn ends (Stop).
        held = groups.pop(last)[0]
    ordered = sorted(groups.values(), key=lambda item: item[0])
    return _Scan(ordered, skipped, starts, end, held, transcript.partial)


class _Stopped(Exception):  # noqa: N818 - control flow, not an error
    """Recording stopped at a call that could not be recorded."""

    def __init__(self, start: int, reason: str) -> None:
        super().__init__(reason)
        self.start = start
        self.reason = reason


class _Tally:
    """What a pass recorded so far."""

    def __init__(self) -> None:
        self.recorded = 0
        self.duplicates = 0
        self.unpriced: list[str] = []


def _record(
    deps: SpendDeps, hook: HookInput, call: TranscriptCall, key: str, usage: dict[str, Any],
    ref: str | None, agent: str | None,
) -> dict[str, Any]:  # fmt: skip
    # The session's agent rides on every record, so budgets matched by agent
    # count spend that settles no verdict (a subagent's call, say) too.
    document, _warning = calls.record(
        deps, None, PROVIDER, verdict_ref=ref, model=call.model, cycle_id=clip(hook.session_id),
        idempotency_key_value=key, usage_object=usage, agent=agent,
    )  # fmt: skip
    return document


def _top_up(
    deps: SpendDeps, hook: HookInput, call: TranscriptCall, first: dict[str, Any], tally: _Tally,
    agent: str | None,
) -> tuple[int, int]:  # fmt: skip
    """Record what a call's fullest line holds beyond what its records hold already.

    Top-ups are numbered from 1 under ``anthropic:<message id>:<n>``; a number
    already used is a duplicate whose tokens count as recorded, so the
    records of a call always add up to its fullest usage, however often the
    transcript is read. Returns the micro-USD of the call's records, all and
    new ones.
    """
    recorded = tokens_from_payload(first.get("tokens"))
    micros = [first.get("actual_micros")]
    new = 0
    number = 1
    while recorded is not None and (owed := still_owed(call.tokens, recorded)) is not None:
        document = _record(
            deps, hook, call, top_up_key(call.message_id, number), usage_object(owed), None, agent
        )
        micros.append(document.get("actual_micros"))
        if document.get("duplicate"):
            found = tokens_from_payload(document.get("tokens"))
            recorded = (
                None if found is None else TokenCounts(*map(sum, zip(recorded, found, strict=True)))
            )
        else:
            tally.recorded += 1
            new += int(micros[-1] or 0)
            break
        number += 1
    return sum(int(m or 0) for m in micros), new


def _record_calls(
    deps: SpendDeps, hook: HookInput, scan: _Scan, cursor: dict[str, Any], tally: _Tally,
    *, fresh: bool, agent: str | None,
) -> None:  # fmt: skip
    """Record each call in order, each settling the oldest waiting verdict ref.

    A call recorded before (its key is a duplicate) is topped up when its
    fullest line holds more than was recorded.

    Raises:
        _Stopped: a call could not be recorded (the ones before it were).
    """
    pending: list[str] = cursor["pending"]
    for start, call in scan.calls:
        ref = pending.pop(0) if pending else None
        try:
            document = _record(deps, hook, call, call_key(call.message_id), call.usage, ref, agent)
            duplicate = bool(document.get("duplicate"))
            if duplicate and ref is not None:
                pending.insert(0, ref)  # nothing was settled: the ref waits for a new call
                ref = None
            all_micros, new_micros = (
                _top_up(deps, hook, call, document, tally, agent) if duplicate else (0, 0)
            )
        except LedgerError as exc:
            if ref is not None:
                pending.insert(0, ref)
            raise _Stopped(start, str(exc)) from exc
        micros = document.get("actual_micros")
        if duplicate:
            tally.duplicates += 1
        else:
            tally.recorded += 1
        if micros is None:
            tally.unpriced.append(call.model)
        elif not duplicate:
            cursor["calls"] += 1
            cursor["micros"] += int(micros)
        elif fresh:
            # Read from the start, every call of the session counts once, whole.
            cursor["calls"] += 1
            cursor["micros"] += all_micros
        else:
            cursor["micros"] += new_micros


def _advance(cursor: dict[str, Any], scan: _Scan, stop: int, transcript: TranscriptReader) -> None:
    """Move the cursor to ``stop`` (a line start, or the end of the lines read).

    A too-long last line without ``\\n`` at ``stop`` is remembered with how
    far it was read, so the next read goes on from there.
    """
    partial = scan.partial
    if stop == scan.end and partial is not None and partial[0] == stop and partial[2]:
        cursor["partial"] = {"start": stop, "scanned": partial[1]}
    else:
        cursor["partial"] = None
    index = bisect_left(scan.starts, stop)
    if index == 0:
        return  # nothing before ``stop`` was read in this pass: the cursor stays
    # The end of the line before ``stop`` (at most TAIL_BYTES of it) tells a
    # transcript rewritten in place from the one that was read.
    tail_start = max(scan.starts[index - 1], stop - TAIL_BYTES)
    cursor["offset"] = stop
    cursor["tail"] = {
        "start": tail_start,
        "sha256": _digest(transcript.read_at(tail_start, stop - tail_start)),
    }


class _FileOutcome(NamedTuple):
    skipped: list[str]
    problem: str | None = None
    unrecorded: bool = False


def _record_file(
    deps: SpendDeps, hook: HookInput, path: str, tally: _Tally, *, final: bool, agent: str | None
) -> _FileOutcome:
    """Record the calls of one transcript file from where its cursor stopped."""
    try:
        store = deps.transcripts
        with store.locked(path):
            cursor = cursor_from(store.load_cursor(path))
            with store.open(path) as transcript:
                start = _resume_at(cursor, transcript)
                scan = _scan(transcript, start, _oversized_from(cursor, start), final=final)
                stop = scan.end if scan.held is None else scan.held
                outcome = _FileOutcome(scan.skipped)
                try:
                    _record_calls(deps, hook, scan, cursor, tally, fresh=start == 0, agent=agent)
                except _Stopped as stopped:
                    stop = min(stop, stopped.start)
                    problem = f"could not record a call of {path}: {stopped.reason}"
                    outcome = _FileOutcome(scan.skipped, problem, unrecorded=True)
                _advance(cursor, scan, stop, transcript)
            store.save_cursor(path, cursor)
    except InputDataError as exc:  # the transcript itself: nothing to record from it
        return _FileOutcome([], str(exc))
    except LedgerError as exc:
        return _FileOutcome([], str(exc), unrecorded=True)
    return outcome


def record_transcript(
    deps: SpendDeps, hook: HookInput, *, final: bool, agent: str | None = None
) -> SpendReport:
    """Record every call of the hook's transcript, and its subagents', not recorded yet.

    Subagents (the Task tool) write their own transcripts in
    ``<session>/subagents/`` beside the session's; each is read the same way,
    with its own cursor. ``final`` (Stop) also records each file's newest
    call; otherwise a call with nothing written after it waits for the next
    read, as its usage may still grow. Never raises a ``LedgerError``: what
    could not be read or recorded is the report's ``problem``, and nothing is
    guessed.
    """
    path = hook.transcript_path
    if not path:
        return SpendReport(problem="the hook input names no transcript_path")
    tally = _Tally()
    skipped: list[str] = []
    problems: list[str] = []
    unrecorded = False
    try:
        paths = [path, *deps.transcripts.subagents(path)]
    except LedgerError as exc:
        paths = [path]
        problems.append(str(exc))
    for each in paths:
        outcome = _record_file(deps, hook, each, tally, final=final, agent=agent)
        where = "" if each == path else f"{each}: "
        skipped.extend(f"{where}{line}" for line in outcome.skipped)
        if outcome.problem is not None:
            problems.append(outcome.problem)
        if outcome.unrecorded:
            unrecorded = True
            break  # the chain refuses: the next files would fail the same way
    return SpendReport(
        tally.recorded, tally.duplicates, tuple(skipped), tuple(tally.unpriced),
        "; ".join(problems) or None, unrecorded,
    )  # fmt: skip
