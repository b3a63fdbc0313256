"""One idempotency key per provider response, whichever path records it.

The SDK guards, the gateway and the Claude Code transcript reader all seal a
response under ``<provider>:<response id>`` (Anthropic ``msg_…``, OpenAI
``chatcmpl-…`` / ``resp_…``, Gemini ``responseId``), so a response seen by two
of them (hooks and the gateway on one home) counts once.
"""

import re

# Ids longer than this, or with characters a key cannot hold, get no response
# key: each path then records under its own key (a hash or the verdict's ref).
_RESPONSE_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


def response_key(provider: str, response_id: str | None) -> str | None:
    """``<provider>:<response id>``, or ``None`` when the id cannot be part of a key."""
    if response_id is None or not _RESPONSE_ID.fullmatch(response_id):
        return None
    return f"{provider}:{response_id}"
