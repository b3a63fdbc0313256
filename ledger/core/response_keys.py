"""One idempotency key per provider response, whichever path records it.

The SDK guards, the gateway and the Claude Code transcript reader all seal a
response under ``<provider>:<response id>`` (Anthropic ``msg_…``, OpenAI
``chatcmpl-…`` / ``resp_…``, Gemini ``responseId``), so a response seen by two
of them (hooks and the gateway on one home) counts once. A response id that
the same path already recorded for another call was reused by the server: that
record gets a key naming its verdict too (``verdict_key``), so it counts.
"""

import re
from typing import Any

# Ids longer than this, or with characters a key cannot hold, get no response
# key: each path then records under its own key (a hash or the verdict's ref).
_RESPONSE_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


def response_key(provider: str, response_id: str | None) -> str | None:
    """``<provider>:<response id>``, or ``None`` when the id cannot be part of a key."""
    if response_id is None or not _RESPONSE_ID.fullmatch(response_id):
        return None
    return f"{provider}:{response_id}"


# What a verdict-named key keeps of the verdict's ref: 64 bits, unique per call.
_VERDICT_DIGITS = 16
_MAX_KEY = 128


def verdict_key(key: str, verdict_ref: str) -> str:
    """``key`` naming its verdict too: the key of a record whose response id another call used.

    OpenAI-compatible servers (Ollama's ``chatcmpl-<0..999>``) reuse response
    ids, so one id can name several calls; the verdict that admitted a call
    names it alone, so the response part may be shortened to fit a key.
    """
    tail = f":{verdict_ref[:_VERDICT_DIGITS]}"
    return f"{key[: _MAX_KEY - len(tail)]}{tail}"


def another_call(first: dict[str, Any], verdict_ref: str | None, recorded_by: str | None) -> bool:
    """Whether a record sealed under a response key (``first``, its payload) was another call's.

    It was when the same path (``recorded_by``: the gateway, an SDK guard)
    recorded it for another verdict: one path records one call once, so the
    response id was reused. The same verdict again is a retry of the same
    record; another path's record is the same response seen twice (an SDK
    guard behind the gateway), counted once.
    """
    if recorded_by is None or verdict_ref is None:
        return False
    first_ref = first.get("verdict_ref")
    return (
        isinstance(first_ref, str)
        and first_ref != verdict_ref
        and first.get("recorded_by") == recorded_by
    )
