"""Server-side tools in a request: bounded, so their fees have an upper bound.

A web search the provider runs for a call is billed per search, beside the
call's tokens. A request's tool uses are bounded by the tool's own limit
(Anthropic ``max_uses`` on each ``web_search_*`` and ``web_fetch_*`` tool;
OpenAI Responses ``max_tool_calls`` when a tool the provider runs is given);
a request without one gets ``default_max_uses`` written into it before it is
forwarded, so the estimate's bound is the provider's too. A Chat Completions
request with ``web_search_options`` (the search models) counts one search.
What those tools bring into the context counts as the context window (each
provider module's tool list); the fees of tools other than web search, which
the price table does not carry, are the providers' published ones below.
"""

import json
from typing import Any

from ledger.providers.limits import body_bytes
from ledger.providers.routes import Route


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_web_search(tool: Any) -> bool:
    kind = tool.get("type") if isinstance(tool, dict) else None
    return isinstance(kind, str) and kind.startswith("web_search")


def _is_bounded_anthropic(tool: Any) -> bool:
    kind = tool.get("type") if isinstance(tool, dict) else None
    return isinstance(kind, str) and kind.startswith(("web_search", "web_fetch"))


# OpenAI Responses tools the provider runs, each call counted by max_tool_calls.
_OPENAI_RUN_TOOLS = ("web_search", "file_search", "code_interpreter", "image_generation", "mcp")
# Published per-call fees (platform.openai.com/docs/pricing, "Built-in tools"):
# file search $2.50 per 1,000 calls; a code interpreter container $0.03.
OPENAI_FILE_SEARCH_MICROS = 2_500
OPENAI_CONTAINER_MICROS = 30_000


def _openai_kind(tool: Any) -> str:
    kind = tool.get("type") if isinstance(tool, dict) else None
    return kind if isinstance(kind, str) else ""


def tool_fee_micros(route: Route, document: dict[str, Any], default_max_uses: int) -> int:
    """The most a request's non-search server tools may cost in fees, in micro-USD.

    Call after ``bound_document_searches``, whose limits this reads.
    """
    if route.kind == "generate_content":
        from ledger.providers.gemini import grounding_fee_micros

        return grounding_fee_micros(document, default_max_uses)
    if route.kind != "responses":
        return 0
    given = document.get("tools")
    kinds = [_openai_kind(tool) for tool in (given if isinstance(given, list) else [])]
    calls = document.get("max_tool_calls")
    uses: int = calls if isinstance(calls, int) and _positive(calls) else default_max_uses
    fee = 0
    if "file_search" in kinds:
        fee += uses * OPENAI_FILE_SEARCH_MICROS
    if "code_interpreter" in kinds:
        fee += uses * OPENAI_CONTAINER_MICROS
    return fee


def bound_web_searches(route: Route, body: bytes, default_max_uses: int) -> tuple[bytes, int]:
    """``body`` with every web search bounded, and the most searches it may make.

    The body is rewritten only when a limit had to be added; a body that is
    not a JSON object is returned as it is (its estimate refuses it).
    """
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return body, 0
    except Exception:  # noqa: BLE001 - any body json cannot read is the estimate's to refuse
        return body, 0
    if not isinstance(document, dict):
        return body, 0
    changed, searches = bound_document_searches(route, document, default_max_uses)
    if not changed:
        return body, searches
    return body_bytes(document), searches


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
        for tool in tools:
            if not _is_bounded_anthropic(tool):
                continue
            if not _positive(tool.get("max_uses")):
                tool["max_uses"] = default_max_uses
                changed = True
            if _is_web_search(tool):
                searches += tool["max_uses"]
    elif route.kind == "responses" and any(
        _openai_kind(tool).startswith(_OPENAI_RUN_TOOLS) for tool in tools
    ):
        if not _positive(document.get("max_tool_calls")):
            document["max_tool_calls"] = default_max_uses
            changed = True
        searches = document["max_tool_calls"] if searching else 0
    elif route.kind == "chat_completions" and document.get("web_search_options") is not None:
        searches = 1
    return changed, searches
