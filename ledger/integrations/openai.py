"""``guard_client(client, book)`` for the official OpenAI SDK (sync or async).

Every request the client sends to ``/chat/completions`` or ``/responses`` —
``create``, ``parse``, ``stream``, ``with_raw_response``,
``with_streaming_response``, on this client or any ``copy()`` or
``with_options()`` of it — runs a verdict first and records its usage after
(see ``ledger.integrations._gate``). A Chat Completions stream reports usage
only when asked (``stream_options={"include_usage": True}``); without it the
call is recorded at its estimate. Everything else is the original client.
"""

from typing import Any

from ledger.api import Ledger
from ledger.integrations._gate import CallGate
from ledger.integrations._transport import guarded_client


def guard_client(
    client: Any, book: Ledger, *, session: str | None = None, agent: str | None = None
) -> Any:
    """A copy of ``client`` (``openai.OpenAI`` or ``AsyncOpenAI``) gated by ``book``.

    ``session`` scopes each verdict and record to a cycle id, ``agent`` each
    verdict to an agent (both as ``ledger verdict --cycle-id/--agent``).

    Raises:
        TypeError: ``client`` is not an OpenAI SDK client.
    """
    import openai

    gate = CallGate(book, "openai", session=session, agent=agent)
    return guarded_client(client, gate, openai.OpenAIError)
