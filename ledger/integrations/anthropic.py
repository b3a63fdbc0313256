"""``guard_client(client, book)`` for the official Anthropic SDK (sync or async).

Every ``client.messages.create`` runs a verdict first (``BudgetHalted`` and
nothing sent on a halt) and records the response's ``usage`` after it; a
stream (``stream=True``) is recorded from its ``message_start`` and
``message_delta`` usage when it ends or is closed.
"""

from typing import Any

from ledger.api import Ledger
from ledger.integrations._guard import Endpoint, Proxy, merge


def _absorb(usage: dict[str, Any], event: Any) -> None:
    kind = getattr(event, "type", None)
    if kind == "message_start":
        merge(usage, event.message.usage)
    elif kind == "message_delta":
        merge(usage, event.usage)


def guard_client(client: Any, book: Ledger) -> Any:
    """The client, with ``messages.create`` guarded by ``book``; all else unchanged."""
    messages = client.messages
    create = Endpoint(messages.create, book, "anthropic", "messages", _absorb)
    return Proxy(client, {"messages": Proxy(messages, {"create": create})})
