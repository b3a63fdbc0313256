"""Azure OpenAI's model paths, as pure functions: deployments and the v1 surface.

Paths (under the gateway's ``/azure`` prefix):
``POST /openai/deployments/{deployment}/chat/completions`` and ``/responses``
(any ``api-version`` kept), and the v1 surface ``POST /openai/v1/chat/completions``
and ``/responses``, whose body's ``model`` names the deployment. Bodies and
answers are OpenAI's. A deployment names no model, so the operator maps each
one to its model (``[proxy.azure.deployments]``); an unmapped one is refused.
"""

import re
from dataclasses import dataclass, replace
from typing import Any

from ledger.providers.estimate import RequestEstimate, RequestRefused, estimate_request
from ledger.providers.routes import Route

PROVIDER = "azure"
_DEPLOYMENT = re.compile(r"^/openai/deployments/([^/]+)/(chat/completions|responses)$")
_V1 = re.compile(r"^/openai/v1/(chat/completions|responses)$")
_KINDS = {"chat/completions": "chat_completions", "responses": "responses"}


@dataclass(frozen=True, slots=True)
class AzureRoute:
    """An Azure OpenAI endpoint: its kind and the deployment its path names (if any)."""

    kind: str
    deployment: str | None = None

    @property
    def is_model_call(self) -> bool:
        """Whether the endpoint runs a model (always: only model calls are served)."""
        return True


def azure_route(method: str, path: str) -> AzureRoute | None:
    """The Azure route of ``method path`` (the path after ``/azure``), or ``None``."""
    if method.upper() != "POST":
        return None
    found = _DEPLOYMENT.fullmatch(path)
    if found is not None:
        return AzureRoute(_KINDS[found.group(2)], found.group(1))
    v1 = _V1.fullmatch(path)
    return None if v1 is None else AzureRoute(_KINDS[v1.group(1)])


def estimate_azure(
    found: AzureRoute,
    body: bytes,
    deployments: dict[str, str],
    *,
    default_output_limit: int | None,
) -> RequestEstimate:
    """The estimate of an Azure OpenAI call, priced as the model its deployment serves.

    Raises:
        RequestRefused: the deployment is not in ``[proxy.azure.deployments]``,
            or the body cannot be estimated.
    """
    route = Route(PROVIDER, found.kind)  # type: ignore[arg-type]
    if found.deployment is not None:
        deployment = found.deployment
        # The path names the deployment: the body needs no model of its own.
        import json

        try:
            document: Any = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            document = None
        if isinstance(document, dict) and not document.get("model"):
            body = json.dumps({**document, "model": deployment}).encode("utf-8")
        estimate = estimate_request(route, body, default_output_limit=default_output_limit)
        if isinstance(document, dict) and "model" not in document:
            estimate.document.pop("model", None)
    else:
        estimate = estimate_request(route, body, default_output_limit=default_output_limit)
        deployment = estimate.model
    model = deployments.get(deployment)
    if model is None:
        raise RequestRefused(
            f"the Azure deployment {deployment!r} is not mapped to a model in "
            "[proxy.azure.deployments]"
        )
    return replace(estimate, model=model)
