"""Which price-table entries price a cloud's model ids (pure).

A model called through a cloud is recorded under the cloud's provider id
(``bedrock``, ``vertex``, ``azure``) with the id the cloud knows it by, and
priced from that cloud's entries in the price table, else as the vendor's own
model:

- ``bedrock``: the ``aws`` entries match foundation-model ids
  (``anthropic.claude-…-v1:0``) and inference-profile ids (``us.``/``eu.``/
  ``apac.``/``global.`` prefixed); an inference-profile ARN is priced by the id
  its last path segment names. Else the vendor's model, without the region
  prefix, the vendor and the ``-vN:M`` version (``anthropic`` →
  ``claude-opus-4-5-20251101``).
- ``vertex``: the ``google`` entries (Claude on Vertex as ``claude-…@date``).
- ``azure``: the ``azure`` entries, else the OpenAI model's.
"""

import re

CLOUD_PROVIDERS = ("bedrock", "vertex", "azure")
# Bedrock vendors whose own models the price table prices under another provider.
_VENDORS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "mistral": "mistral",
    "deepseek": "deepseek",
}
# A prefix and a name at least: ``us.`` + ``anthropic.claude-…``.
_PARTS = 2
_VERSION = re.compile(r"-v\d+(:\d+)?$")
_REGION_PREFIXES = ("global", "us", "eu", "apac", "au", "jp", "ca", "us-gov", "in")


def bedrock_model_id(model: str) -> str:
    """The model or inference-profile id of a Bedrock ``modelId`` (an ARN's last segment)."""
    if model.startswith("arn:"):
        return model.rpartition("/")[2]
    return model


def price_candidates(provider: str, model: str) -> tuple[tuple[str, str], ...]:
    """The (price-table provider, model) pairs that may price ``provider/model``, in order."""
    if provider == "bedrock":
        model_id = bedrock_model_id(model)
        found = [("aws", model_id)]
        parts = model_id.split(".")
        if len(parts) >= _PARTS and parts[0] in _REGION_PREFIXES:
            parts = parts[1:]
        if len(parts) >= _PARTS and parts[0] in _VENDORS:
            vendor_model = _VERSION.sub("", ".".join(parts[1:]))
            found.append((_VENDORS[parts[0]], vendor_model))
        return tuple(found)
    if provider == "vertex":
        return (("google", model),)
    if provider == "azure":
        return (("azure", model), ("openai", model))
    return ()


def usage_format(provider: str, usage: dict[str, object]) -> str:
    """Which provider's usage object ``usage`` of ``provider`` is (``anthropic``, ``google``…).

    Bedrock and Vertex serve Claude in the Messages format; Bedrock's Converse
    API reports ``inputTokens`` / ``outputTokens`` (``bedrock-converse``);
    Vertex's Gemini models report ``usageMetadata`` counts; Azure is OpenAI's.
    """
    if provider == "bedrock":
        return "bedrock-converse" if "inputTokens" in usage else "anthropic"
    if provider == "vertex":
        return "google" if "promptTokenCount" in usage else "anthropic"
    if provider == "azure":
        return "openai"
    return provider
