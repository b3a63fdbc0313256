"""Google Vertex AI's model paths, as pure functions: Claude's rawPredict and Gemini.

Paths (under the gateway's ``/vertex`` prefix):
``POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict``
and ``:streamRawPredict`` carry Anthropic Messages bodies without ``model``
(``anthropic_version`` in the body) and answer as the Messages API does (JSON,
or SSE read by the Messages reader); ``…/models/count-tokens:rawPredict`` costs
nothing. ``publishers/google/models/{m}:generateContent`` and
``:streamGenerateContent`` are the Gemini API's bodies and answers.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ledger.providers.estimate import RequestEstimate, estimate_request
from ledger.providers.routes import Route
from ledger.providers.tally import field

PROVIDER = "vertex"
_PATH = re.compile(
    r"^/v1(?:beta1)?/projects/([^/]+)/locations/([^/]+)/publishers/(anthropic|google)"
    r"/models/([^/:]+):(rawPredict|streamRawPredict|generateContent|streamGenerateContent)$"
)
_KINDS = {
    ("anthropic", "rawPredict"): "messages",
    ("anthropic", "streamRawPredict"): "messages",
    ("google", "generateContent"): "generate_content",
    ("google", "streamGenerateContent"): "generate_content",
}


@dataclass(frozen=True, slots=True)
class VertexRoute:
    """A Vertex AI endpoint: its kind, model, location, and whether it streams."""

    kind: str
    model: str
    location: str
    streamed: bool = False

    @property
    def is_model_call(self) -> bool:
        """Whether the endpoint runs a model (and so is gated and recorded)."""
        return self.kind != "free"


def vertex_route(method: str, path: str) -> VertexRoute | None:
    """The Vertex route of ``method path`` (the path after ``/vertex``), or ``None``."""
    found = _PATH.fullmatch(path)
    if found is None or method.upper() != "POST":
        return None
    _project, location, publisher, model, action = found.groups()
    if publisher == "anthropic" and model == "count-tokens" and action == "rawPredict":
        return VertexRoute("free", model, location)
    kind = _KINDS.get((publisher, action))
    if kind is None or model == "count-tokens":
        return None
    return VertexRoute(kind, model, location, streamed=action.startswith("stream"))


def upstream_base(location: str) -> str:
    """Vertex AI's default endpoint for ``location`` (``global`` has no region prefix)."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def estimate_vertex(
    found: VertexRoute,
    body: bytes,
    *,
    default_output_limit: int | None,
    headers: Iterable[tuple[str, str]] = (),
) -> RequestEstimate:
    """The estimate of a Vertex AI model call (a Messages or a Gemini body).

    Claude's ``anthropic-beta`` headers (Vertex takes betas there, as
    Anthropic's API does) count as they do on the Messages API.

    Raises:
        RequestRefused: the body is not a JSON object, or states no output limit
            (and no default is given).
    """
    if found.kind == "generate_content":
        return estimate_request(
            Route(PROVIDER, "generate_content", model=found.model, streamed=found.streamed),
            body,
            default_output_limit=default_output_limit,
            headers=headers,
        )
    import json

    from ledger.providers.bedrock import _document

    document = _document(body)
    # The Messages reader, with the path's model; the body goes on without it.
    probe = json.dumps({**document, "model": found.model}).encode("utf-8")
    estimate = estimate_request(
        Route(PROVIDER, "messages"), probe, default_output_limit=default_output_limit,
        headers=headers,
    )  # fmt: skip
    estimate.document.pop("model", None)
    user_id = field(document.get("metadata"), "user_id")
    return replace(estimate, metadata_user_id=user_id if isinstance(user_id, str) else None)
