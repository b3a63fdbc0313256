"""Server-side tools in a request: bounded, so their fees have an upper bound.

A web search the provider runs for a call is billed per search, beside the
call's tokens. A request's searches are bounded by the tool's own limit
(Anthropic ``max_uses`` on each ``web_search_*`` tool; OpenAI Responses
``max_tool_calls`` when a ``web_search*`` tool is given); a request without
one gets ``default_max_uses`` written into it before it is forwarded, so the
estimate's bound is the provider's too. A Chat Completions request with
``web_search_options`` (the search models) counts one search.
"""

import json
from typing import Any

from ledger.providers.routes import Route


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_web_search(tool: Any) -> bool:
    kind = tool.get("type") if isinstance(tool, dict) else None
    return isinstance(kind, str) and kind.startswith("web_search")


def bound_web_searches(route: Route, body: bytes, default_max_uses: int) -> tuple[bytes, int]:
    """``body`` with every web search bounded, and the most searches it may make.

    The body is rewritten only when a limit had to be added; a body that is
    not a JSON object is returned as it is (its estimate refuses it).
    """
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return body, 0
    if not isinstance(document, dict):
        return body, 0
    changed, searches = bound_document_searches(route, document, default_max_uses)
    if not changed:
        return body, searches
    return json.dumps(document, ensure_ascii=False).encode("utf-8"), searches


def bound_document_searches(
    route: Route, document: dict[str, Any], default_max_uses: int
) -> tuple[bool, int]:
    """Bound every web search of a parsed request in place: whether it changed, and the most.

    The gateway, which has parsed the request for its estimate already, uses
    this form, so the body is read once per call.
    """
    given = document.get("tools")
    tools: list[Any] = given if isinstance(given, list) else []
    searching = [tool for tool in tools if _is_web_search(tool)]
    changed = False
    searches = 0
    if route.kind == "messages":
        for tool in searching:
            if not _positive(tool.get("max_uses")):
                tool["max_uses"] = default_max_uses
                changed = True
            searches += tool["max_uses"]
    elif route.kind == "responses" and searching:
        if not _positive(document.get("max_tool_calls")):
            document["max_tool_calls"] = default_max_uses
            changed = True
        searches = document["max_tool_calls"]
    elif route.kind == "chat_completions" and document.get("web_search_options") is not None:
        searches = 1
    return changed, searches
