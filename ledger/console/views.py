"""Each page's data, one function per page: the JSON endpoint and the page answer the same.

Each takes the request (its query is the filters), checks who may see it, and
returns the document both the page and ``/console/api/<page>`` show.
"""

from typing import Any

from starlette.requests import Request

from ledger.console import data
from ledger.console.auth import ROLE_KEY, Principal
from ledger.console.web import Refused, allow, blocking

__all__ = ["PAGES", "allow", "live_page"]


def _filters(request: Request, runtime: Any) -> data.Filters:
    try:
        return data.parse_filters(request.query_params, data.reporting_zone(runtime)[1])
    except data.FilterError as exc:
        raise Refused(400, str(exc)) from exc


def _own_only(request: Request, principal: Principal) -> None:
    """A key holder asking about any other key is refused (403)."""
    asked = request.query_params.get("key")
    if principal.role == ROLE_KEY and asked not in (None, "", principal.name):
        raise Refused(403, "a gateway key sees its own figures only")


async def overview(request: Request, principal: Principal) -> dict[str, Any]:
    """Every cap and budget, the burn rate, the chain's health."""
    allow(principal)
    state = request.app.state
    return dict(await blocking(data.overview, state.runtime()))


async def spend(request: Request, principal: Principal) -> dict[str, Any]:
    """Spend grouped by a dimension over a range."""
    allow(principal)
    runtime = request.app.state.runtime()
    filters = _filters(request, runtime)
    return dict(await blocking(data.spend, runtime, filters))


async def calls(request: Request, principal: Principal) -> dict[str, Any]:
    """One row per call, newest first, by cursor."""
    allow(principal)
    runtime = request.app.state.runtime()
    filters = _filters(request, runtime)
    return dict(await blocking(data.call_rows, runtime, filters))


async def keys(request: Request, principal: Principal) -> dict[str, Any]:
    """Every key (admins may change them)."""
    allow(principal)
    document = dict(await blocking(data.keys, request.app.state.runtime()))
    document["can_change"] = principal.role == "admin"
    return document


async def alerts(request: Request, principal: Principal) -> dict[str, Any]:
    """The alert rules and deliveries."""
    allow(principal)
    return dict(await blocking(data.alerts, request.app.state.runtime()))


async def integrity(request: Request, principal: Principal) -> dict[str, Any]:
    """The chain's health and the last full verification."""
    allow(principal)
    state = request.app.state
    health = await blocking(data.overview, state.runtime())
    return {"chain": health["chain"], "verification": state.verifier.status()}


async def me(request: Request, principal: Principal) -> dict[str, Any]:
    """A gateway key's own figures."""
    allow(principal, own=True)
    _own_only(request, principal)
    if principal.role != ROLE_KEY:
        raise Refused(403, "the Me view is a gateway key's: sign in with one (lk_...)")
    state = request.app.state
    return dict(await blocking(data.me, state.runtime(), principal.key))


async def live_page(request: Request, principal: Principal) -> dict[str, Any]:
    """The Live page's histogram of halts (the rows arrive over the feed)."""
    allow(principal)
    state = request.app.state
    return dict(await blocking(data.halt_histogram, state.runtime()))


PAGES = {
    "overview": overview, "spend": spend, "calls": calls, "keys": keys,
    "alerts": alerts, "integrity": integrity, "me": me,
}  # fmt: skip
