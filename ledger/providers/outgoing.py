"""A gated request as it goes upstream: its estimate, and the body that bounds it.

The gateway sends what the estimate assumed: a request without an output
limit gets the one it was estimated with, server tools get the use limits
their fees were bounded by, and a Chat Completions stream asks for its usage
chunk (so its record is exact rather than its whole estimate). Each is
written into the parsed request once, in the spelling the caller used.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ledger.providers.estimate import RequestEstimate, estimate_request
from ledger.providers.limits import body_bytes, limited_body
from ledger.providers.routes import Route
from ledger.providers.server_tools import bound_document_searches, tool_fee_micros


@dataclass(frozen=True, slots=True)
class Outgoing:
    """The estimate, the body to send, and what was added to it."""

    estimate: RequestEstimate
    body: bytes
    searches: int  # the most web searches the request may make
    fee_micros: int  # the most its other server tools may cost in fees
    added_usage: bool  # stream_options.include_usage was added by the gateway


def ask_for_usage(route: Route, document: dict[str, Any]) -> bool:
    """Ask a Chat Completions stream for its usage chunk; whether the client had not."""
    if route.kind != "chat_completions" or document.get("stream") is not True:
        return False
    options = document.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return False
    given = options if isinstance(options, dict) else {}
    document["stream_options"] = {**given, "include_usage": True}
    return True


def outgoing_request(
    route: Route,
    body: bytes,
    headers: Iterable[tuple[str, str]],
    *,
    default_output_limit: int,
    server_tool_max_uses: int,
    chat_field: str,
) -> Outgoing:
    """Estimate a request and build the body that the upstream will bound alike.

    Raises:
        RequestRefused: the request cannot be estimated or written.
    """
    estimate = estimate_request(
        route, body, default_output_limit=default_output_limit, headers=headers
    )
    return bounded_request(
        route, estimate, body, server_tool_max_uses=server_tool_max_uses, chat_field=chat_field
    )


def bounded_request(
    route: Route,
    estimate: RequestEstimate,
    body: bytes,
    *,
    server_tool_max_uses: int,
    chat_field: str,
) -> Outgoing:
    """The body that the upstream bounds as ``estimate`` assumed, for a request estimated already.

    ``route`` names the request's format (its kind): the cloud routes, which
    estimate their own bodies, bound them as the format's first-party API does.

    Raises:
        RequestRefused: the request cannot be written.
    """
    document = estimate.document
    bounded, searches = bound_document_searches(route, document, server_tool_max_uses)
    fees = tool_fee_micros(route, document, server_tool_max_uses)
    added_usage = ask_for_usage(route, document)
    if not estimate.limit_given:
        # The limit the estimate assumed is the one the upstream must enforce.
        body = limited_body(route.kind, document, estimate.output_limit, chat_field=chat_field)
    elif bounded or added_usage:
        body = body_bytes(document)
    return Outgoing(estimate, body, searches, fees, added_usage)
