"""``guard_client(client, book)`` for the official OpenAI SDK (sync or async).

``client.chat.completions.create`` and ``client.responses.create`` run a
verdict first (``BudgetHalted`` and nothing sent on a halt) and record the
response's ``usage`` after it. A Chat Completions stream reports usage in its
last chunk only when asked (``stream_options={"include_usage": True}``); a
Responses stream in its ``response.completed`` event. A stream that delivered
no usage is recorded at its reserved estimate.
"""

from typing import Any

from ledger.api import Ledger
from ledger.integrations._guard import Endpoint, Proxy, merge


def _absorb_chat(usage: dict[str, Any], chunk: Any) -> None:
    if getattr(chunk, "usage", None) is not None:
        merge(usage, chunk.usage)


def _absorb_responses(usage: dict[str, Any], event: Any) -> None:
    response = getattr(event, "response", None)
    if response is not None and getattr(response, "usage", None) is not None:
        merge(usage, response.usage)


def guard_client(client: Any, book: Ledger) -> Any:
    """The client, with ``chat.completions.create`` and ``responses.create`` guarded."""
    completions = client.chat.completions
    chat_create = Endpoint(completions.create, book, "openai", "messages", _absorb_chat)
    chat = Proxy(client.chat, {"completions": Proxy(completions, {"create": chat_create})})
    responses = client.responses
    responses_create = Endpoint(responses.create, book, "openai", "input", _absorb_responses)
    return Proxy(
        client, {"chat": chat, "responses": Proxy(responses, {"create": responses_create})}
    )
