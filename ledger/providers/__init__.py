"""Each provider's wire format, as pure functions: the one place that knows it.

Which endpoint a request goes to (``route``), what it may cost
(``estimate_request``), what a response reports it cost (``UsageReader``, for
JSON bodies and SSE streams), and the error bodies each provider sends
(``error_body``), and how an admitted call settles however its answer ended
(``settle``, the rule of ``ledger.core.settlement``). Used by the SDK guards
and the gateway alike; no I/O.
"""

from ledger.core.settlement import CallEnd, Settlement, settle, unreadable_usage
from ledger.providers.estimate import RequestEstimate, RequestRefused, estimate_request
from ledger.providers.routes import (
    PROVIDERS,
    Route,
    client_route,
    compatible_route,
    error_body,
    route,
)
from ledger.providers.server_tools import (
    bound_document_searches,
    bound_web_searches,
    tool_fee_micros,
)
from ledger.providers.sse import ServerSentEvent, SSEDecoder
from ledger.providers.usage import UsageReader

__all__ = [
    "PROVIDERS",
    "CallEnd",
    "RequestEstimate",
    "RequestRefused",
    "Route",
    "SSEDecoder",
    "ServerSentEvent",
    "Settlement",
    "UsageReader",
    "bound_document_searches",
    "bound_web_searches",
    "client_route",
    "compatible_route",
    "error_body",
    "estimate_request",
    "route",
    "settle",
    "tool_fee_micros",
    "unreadable_usage",
]
