"""Each provider's wire format, as pure functions: the one place that knows it.

Which endpoint a request goes to (``route``), what it may cost
(``estimate_request``), what a response reports it cost (``UsageReader``, for
JSON bodies and SSE streams), and the error bodies each provider sends
(``error_body``). Used by the SDK guards and the gateway alike; no I/O.
"""

from ledger.providers.estimate import RequestEstimate, RequestRefused, estimate_request
from ledger.providers.routes import (
    PROVIDERS,
    Route,
    client_route,
    compatible_route,
    error_body,
    route,
)
from ledger.providers.sse import ServerSentEvent, SSEDecoder
from ledger.providers.usage import UsageReader

__all__ = [
    "PROVIDERS",
    "RequestEstimate",
    "RequestRefused",
    "Route",
    "SSEDecoder",
    "ServerSentEvent",
    "UsageReader",
    "client_route",
    "compatible_route",
    "error_body",
    "estimate_request",
    "route",
]
