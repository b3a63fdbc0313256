"""What a model request asks for that changes its price, read from its body (pure).

An estimate prices a request's most output at the dearest rate that may apply
(SPEC §17), so it needs what the request may send or get back beside text:

- the **service tier** it asks for: OpenAI ``service_tier`` (``priority``,
  ``flex``; ``auto`` and ``default`` are the standard prices), Anthropic
  ``service_tier`` (``auto``, ``standard_only``);
- the **output modalities** it asks for: OpenAI Chat Completions
  ``modalities`` containing ``audio``, or an ``audio`` output setting; Gemini
  ``generationConfig.responseModalities`` (either spelling) containing
  ``AUDIO`` or ``IMAGE``, or a ``speechConfig``;
- the **input modalities** it sends: OpenAI ``input_audio`` parts (and
  ``input_image`` / ``image_url``), Gemini ``inlineData`` / ``fileData`` parts
  by their MIME type (``audio/*``, ``image/*``, ``video/*``).

Which provider's format a body is in follows its provider (``anthropic``,
``google``, else OpenAI's: Chat Completions when it has ``messages``,
the Responses API otherwise).
"""

from typing import Any, NamedTuple

_MAX_DEPTH = 64


class RequestPricing(NamedTuple):
    """The request's service tier and the modalities beside text on each side."""

    service_tier: str | None = None
    input_modalities: frozenset[str] = frozenset()
    output_modalities: frozenset[str] = frozenset()


def _get(document: Any, *names: str) -> Any:
    """The first of ``names`` a JSON object has (Gemini accepts both spellings)."""
    if not isinstance(document, dict):
        return None
    for name in names:
        if name in document:
            return document[name]
    return None


def _walk(value: Any, depth: int = 0) -> list[dict[str, Any]]:
    """Every JSON object inside ``value`` (bounded in depth)."""
    if depth > _MAX_DEPTH:
        return []
    if isinstance(value, dict):
        found = [value]
        for inner in value.values():
            found.extend(_walk(inner, depth + 1))
        return found
    if isinstance(value, list):
        return [item for inner in value for item in _walk(inner, depth + 1)]
    return []


def _mime_modality(mime: Any) -> str | None:
    if not isinstance(mime, str):
        return None
    kind = mime.partition("/")[0].strip().lower()
    return kind if kind in {"audio", "image", "video"} else None


def _openai(document: dict[str, Any]) -> RequestPricing:
    outputs: set[str] = set()
    modalities = document.get("modalities")
    if isinstance(modalities, list) and "audio" in modalities:
        outputs.add("audio")
    if document.get("audio") is not None and "messages" in document:
        outputs.add("audio")
    inputs: set[str] = set()
    for part in _walk(document.get("messages") or document.get("input")):
        kind = part.get("type")
        if kind == "input_audio":
            inputs.add("audio")
        elif kind in {"input_image", "image_url"}:
            inputs.add("image")
    tier = document.get("service_tier")
    return RequestPricing(tier if isinstance(tier, str) else None, frozenset(inputs),
                          frozenset(outputs))  # fmt: skip


def _gemini(document: dict[str, Any]) -> RequestPricing:
    config = _get(document, "generationConfig", "generation_config")
    outputs: set[str] = set()
    asked = _get(config, "responseModalities", "response_modalities")
    for modality in asked if isinstance(asked, list) else []:
        if isinstance(modality, str) and modality.upper() in {"AUDIO", "IMAGE"}:
            outputs.add(modality.lower())
    if _get(config, "speechConfig", "speech_config") is not None:
        outputs.add("audio")
    inputs: set[str] = set()
    for part in _walk(_get(document, "contents")):
        blob = _get(part, "inlineData", "inline_data", "fileData", "file_data")
        found = _mime_modality(_get(blob, "mimeType", "mime_type"))
        if found is not None:
            inputs.add(found)
    return RequestPricing(None, frozenset(inputs), frozenset(outputs))


def request_pricing(provider: str, document: dict[str, Any]) -> RequestPricing:
    """What ``document`` (a model request of ``provider``) asks for that changes its price."""
    if provider == "google":
        return _gemini(document)
    if provider == "anthropic":
        tier = document.get("service_tier")
        return RequestPricing(tier if isinstance(tier, str) else None)
    return _openai(document)
