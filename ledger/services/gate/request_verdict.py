"""The verdict on a model request as the gateway and the SDK guards see it.

Both estimate a request from its body (``ledger.providers.estimate_request``);
this turns that estimate into one verdict the same way for both: input the
request only points at is sized (``referenced``), and its server-side tools'
most searches are priced in, and what it asks for beside text (audio or image
output, a service tier) prices it at the dearest rate that may apply.
"""

from typing import Any, NamedTuple

from ledger.core.request_pricing import request_pricing
from ledger.core.verdict import Verdict
from ledger.providers import RequestEstimate
from ledger.services.gate import calls, referenced
from ledger.services.gate.prices import web_search_fee_micros


class RequestVerdict(NamedTuple):
    """One request's verdict: the gate's answer, whether the call may go, and its document.

    ``admits`` is the gate's own rule (an admitting verdict that was recorded),
    so a caller never re-derives it from the document's text.
    """

    verdict: Verdict
    admits: bool
    document: dict[str, Any]


def request_verdict(
    deps: Any,
    estimate: RequestEstimate,
    *,
    searches: int = 0,
    fee_micros: int = 0,
    **verdict_args: Any,
) -> RequestVerdict:
    """Decide and reserve one request; its typed verdict beside the printed document.

    ``fee_micros`` is the most the request's other server tools may cost in
    fees (``ledger.providers.tool_fee_micros``). ``verdict_args`` go to
    ``calls.verdict`` as they are (the call's cycle id, agent, tags, gateway
    key, whether it is forwarded once admitted, ...).

    Raises:
        UsageError: a bad argument, or a model with no price.
        ConfigError: the configuration is invalid or has no daily cap.
    """
    provider, model = estimate.provider, estimate.model
    document, admitted = calls.verdict(
        deps, None, provider, model=model,
        input_tokens=referenced.input_tokens(deps, estimate),
        max_output_tokens=estimate.max_output_tokens,
        server_tool_micros=web_search_fee_micros(deps, provider, model, searches) + fee_micros,
        pricing=request_pricing(provider, estimate.document),
        **verdict_args,
    )  # fmt: skip
    return RequestVerdict(Verdict.read(document.get("verdict")), admitted, document)
