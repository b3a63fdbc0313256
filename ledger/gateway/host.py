"""What the cloud routes use of the gateway that serves them, as a protocol.

The gateway (``ledger.gateway.app``) registers the cloud routes; they reach back
only through these parts, so ``app`` imports ``clouds`` and never the reverse.
"""

from typing import Any, Protocol

import httpx
from anyio.abc import TaskGroup
from starlette.requests import Request
from starlette.responses import Response

from ledger.core.proxy_config import ProxySettings
from ledger.gateway.committer import Committer
from ledger.gateway.exchange import Exchange
from ledger.providers.outgoing import Outgoing
from ledger.services.gate.request_verdict import RequestVerdict


class GatewayHost(Protocol):
    """The parts of ``Gateway`` a route family shares: settings, committer, client, verdicts."""

    settings: ProxySettings
    committer: Committer
    client: httpx.AsyncClient
    pumps: TaskGroup | None

    def log(self, line: str) -> None:
        """Write one line to the gateway's log."""

    async def _body(self, request: Request) -> bytes:
        """The request's body, within the gateway's size limit."""

    async def _whole(
        self, response: httpx.Response, exchange: Exchange, provider: str, headers: dict[str, str]
    ) -> Response:
        """A JSON (or error) answer: read, recorded, then handed over whole."""

    async def _decide(
        self,
        provider: str,
        estimate: Any,
        cycle_id: str | None,
        caller: Any,
        prepared: Outgoing,
        client: str,
    ) -> RequestVerdict | Response:
        """The verdict on a gated call (or the error response that answers it)."""
