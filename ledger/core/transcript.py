"""Claude Code transcripts as the API calls they record, pure (SPEC §7).

A transcript (the hook's ``transcript_path``) is JSONL, one object per line.
A line with ``"type": "assistant"`` carries one model response: ``message.id``
(the API's message id), ``message.model``, ``message.usage`` (an Anthropic
Messages ``usage`` object) and, beside the message, ``requestId``. One
response with several content blocks is written as several lines with the
same ``message.id`` and ``requestId``; the earlier lines may hold an
intermediate usage snapshot (fewer output tokens), so a response's usage is
that of its line with the most tokens (the counts only grow).

Lines of other types (user turns, tool results, summaries) are not calls.
Neither are assistant lines Claude Code writes itself without calling the
API (an error notice, "No response requested."): their model is
``<synthetic>`` and their usage all zeros. A line that cannot be read as a
call is reported with a reason and never guessed at.
"""

import hashlib
import json
import re
from typing import Any, NamedTuple

from ledger.core.prices import TokenCounts
from ledger.core.response_keys import response_key
from ledger.core.usage_objects import UsageObjectError, anthropic_tokens

SYNTHETIC_MODEL = "<synthetic>"
PROVIDER = "anthropic"
OWN_KEY_PREFIX = "cc:"
KEY_MAX = 128
MODEL_MAX = 256
_REF_RE = re.compile(r"^[0-9a-f]{64}$")
CURSOR_FORMAT = 1
MAX_PENDING = 64
MIN_ESTIMATE_MICROS = 10_000  # $0.01, SPEC §7


class TranscriptCall(NamedTuple):
    """One line of one API call: who answered, with what usage."""

    message_id: str
    request_id: str | None
    model: str
    usage: dict[str, Any]
    tokens: TokenCounts

    @property
    def identity(self) -> tuple[str, str | None]:
        """What makes lines one call: the message id and the request id."""
        return (self.message_id, self.request_id)


class Skipped(NamedTuple):
    """A line that looked like a call but could not be read as one."""

    reason: str


def call_key(message_id: str) -> str:
    """The idempotency key of a call: the response's own, ``anthropic:<message id>``.

    It is the key the gateway and the SDK guard give the same response, so a
    response the gateway recorded is a duplicate here. A message id no
    response key can hold keeps a key of its own, ``cc:sha256:<its SHA-256>``.
    """
    key = response_key(PROVIDER, message_id)
    if key is not None:
        return key
    digest = hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{OWN_KEY_PREFIX}sha256:{digest}"


def top_up_key(message_id: str, number: int) -> str:
    """The key of a call's ``number``-th top-up: its call key and ``:<number>``."""
    key = f"{call_key(message_id)}:{number}"
    if len(key) <= KEY_MAX:
        return key
    digest = hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{OWN_KEY_PREFIX}sha256:{digest}:{number}"


def tokens_from_payload(payload: object) -> TokenCounts | None:
    """A record's ``tokens`` payload object as counts, or ``None`` when it holds none."""
    if not isinstance(payload, dict):
        return None
    try:
        return TokenCounts(**{name: int(payload.get(name, 0)) for name in TokenCounts._fields})
    except (TypeError, ValueError):
        return None


def still_owed(full: TokenCounts, recorded: TokenCounts) -> TokenCounts | None:
    """The tokens of a call not recorded yet: ``full`` less ``recorded``, kind by kind.

    ``None`` when nothing is owed. Usage snapshots only grow; should a kind
    ever shrink, what was recorded of it stands (never counted twice) and only
    the kinds that grew are owed.
    """
    owed = TokenCounts(*(max(a - b, 0) for a, b in zip(full, recorded, strict=True)))
    return None if total(owed) == 0 else owed


def usage_object(tokens: TokenCounts) -> dict[str, Any]:
    """An Anthropic ``usage`` object holding exactly ``tokens`` (a top-up's usage)."""
    return {
        "input_tokens": tokens.input,
        "cache_creation_input_tokens": tokens.cache_write_5m + tokens.cache_write_1h,
        "cache_creation": {
            "ephemeral_5m_input_tokens": tokens.cache_write_5m,
            "ephemeral_1h_input_tokens": tokens.cache_write_1h,
        },
        "cache_read_input_tokens": tokens.cache_read,
        "output_tokens": tokens.output,
    }


def _text(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    return value if isinstance(value, str) and value else None


def read_line(raw: bytes) -> TranscriptCall | Skipped | None:
    """One transcript line as a call, a skipped line, or ``None`` (not a call).

    Never raises: anything unreadable is a ``Skipped`` with its reason.
    """
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return Skipped("not JSON")
    if not isinstance(document, dict):
        return Skipped("not a JSON object")
    if document.get("type") != "assistant":
        return None
    message = document.get("message")
    if not isinstance(message, dict):
        return Skipped("assistant line without a message object")
    model = message.get("model")
    if model == SYNTHETIC_MODEL:
        return None
    if not isinstance(model, str) or not model or len(model) > MODEL_MAX:
        return Skipped("assistant message without a usable model")
    message_id = _text(message, "id")
    if message_id is None:
        return Skipped("assistant message without an id")
    request_id = document.get("requestId")
    if request_id is not None and not isinstance(request_id, str):
        return Skipped("requestId is not a string")
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return Skipped("assistant message without a usage object")
    try:
        tokens = anthropic_tokens(usage)
    except UsageObjectError as exc:
        return Skipped(str(exc))
    return TranscriptCall(message_id, request_id or None, model, usage, tokens)


def total(tokens: TokenCounts) -> int:
    """Every token a call was billed for (reasoning is part of output)."""
    return (
        tokens.input + tokens.cache_write_5m + tokens.cache_write_1h + tokens.cache_read
        + tokens.output
    )  # fmt: skip


def fuller(kept: TranscriptCall, later: TranscriptCall) -> TranscriptCall:
    """Of two lines of one call, the one with the final usage.

    Usage snapshots only grow, so the final one has the most tokens; on a tie
    the later line wins.
    """
    return later if total(later.tokens) >= total(kept.tokens) else kept


# --------------------------------------------------------------------------- cursors


def fresh_cursor() -> dict[str, Any]:
    """A cursor at the start of a transcript, with no calls counted."""
    return {
        "format": CURSOR_FORMAT, "offset": 0, "tail": None, "calls": 0, "micros": 0,
        "partial": None,
    }  # fmt: skip


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def cursor_from(raw: object) -> dict[str, Any]:
    """A stored cursor checked field by field; anything malformed starts afresh.

    A cursor holds ``offset`` (where the next read starts), ``tail`` (the
    start and SHA-256 of the line just before it), the count and cost of the
    session's priced calls (``calls``, ``micros``), how far a too-long last
    line at ``offset`` was read (``partial``), the refs of verdicts
    waiting to be settled (``pending``) and whether the session was told that
    USD gating is off (``gating_off_noted``).
    """
    cursor = fresh_cursor()
    if not isinstance(raw, dict) or raw.get("format") != CURSOR_FORMAT:
        return {**cursor, "pending": [], "gating_off_noted": False}
    pending = raw.get("pending")
    cursor["pending"] = [
        ref for ref in (pending if isinstance(pending, list) else [])
        if isinstance(ref, str) and _REF_RE.fullmatch(ref)
    ][-MAX_PENDING:]  # fmt: skip
    cursor["gating_off_noted"] = raw.get("gating_off_noted") is True
    tail = raw.get("tail")
    tail_ok = tail is None or (
        isinstance(tail, dict) and _is_count(tail.get("start"))
        and isinstance(tail.get("sha256"), str)
    )  # fmt: skip
    if all(_is_count(raw.get(name)) for name in ("offset", "calls", "micros")) and tail_ok:
        cursor.update({name: raw[name] for name in ("offset", "tail", "calls", "micros")})
        partial = raw.get("partial")
        if isinstance(partial, dict) and all(
            _is_count(partial.get(n)) for n in ("start", "scanned")
        ):
            cursor["partial"] = {"start": partial["start"], "scanned": partial["scanned"]}
    return cursor


def estimate_micros(cursor: dict[str, Any]) -> int:
    """The next call's estimate: the mean cost of the session's calls, at least $0.01."""
    count, total_micros = cursor["calls"], cursor["micros"]
    mean = -(-total_micros // count) if count else 0
    return max(mean, MIN_ESTIMATE_MICROS)
