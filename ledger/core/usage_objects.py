"""Providers' own usage objects as token counts by kind (SPEC §7), pure.

Each token is counted once, at its own kind:

- ``anthropic`` (Messages API ``usage``): ``input_tokens`` are the uncached
  input only; ``cache_creation_input_tokens`` are cache writes, split by the
  ``cache_creation`` object (``ephemeral_5m_input_tokens``,
  ``ephemeral_1h_input_tokens``) where the response has one (writes it does not
  assign are 5-minute writes); ``cache_read_input_tokens``; ``output_tokens``.
- ``openai`` Chat Completions ``usage``: ``prompt_tokens`` *include*
  ``prompt_tokens_details.cached_tokens``; ``completion_tokens`` include
  ``completion_tokens_details.reasoning_tokens``.
- ``openai`` Responses ``usage``: ``input_tokens`` include
  ``input_tokens_details.cached_tokens``; ``output_tokens`` include
  ``output_tokens_details.reasoning_tokens``.
- ``google`` (Gemini ``usageMetadata``): ``promptTokenCount`` *includes*
  ``cachedContentTokenCount``; ``toolUsePromptTokenCount`` is more input;
  the output is ``candidatesTokenCount`` plus ``thoughtsTokenCount``.
- ``bedrock`` and ``vertex`` serve Claude in the Messages format (read as
  ``anthropic``); Bedrock's Converse ``usage`` has ``inputTokens`` (uncached),
  ``cacheReadInputTokens``, ``cacheWriteInputTokens`` and ``outputTokens``;
  Vertex's Gemini models report ``google``'s; ``azure`` is OpenAI's.
- Any other provider is taken to speak the OpenAI API (the OpenAI-compatible
  providers the gateway serves): its usage is read as OpenAI's.

Unknown fields are ignored; a missing required field, a negative or
non-integer count, or a part larger than the whole it belongs to is an error.
"""

from typing import Any

from ledger.core.cloud_models import usage_format
from ledger.core.prices import TokenCounts

MAX_COUNT = 2**53 - 1
USAGE_PROVIDERS = frozenset({"anthropic", "openai", "google"})


class UsageObjectError(ValueError):
    """A usage object that cannot be read; the message names the field."""


def _count(document: dict[str, Any], field: str, *, required: bool = False, where: str = "") -> int:
    value = document.get(field)
    name = f"{where}{field}"
    if value is None:
        if required:
            raise UsageObjectError(f"usage object lacks {name}")
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageObjectError(f"usage {name}: not an integer")
    if value < 0:
        raise UsageObjectError(f"usage {name}: negative")
    if value > MAX_COUNT:
        raise UsageObjectError(f"usage {name}: larger than the chain can hold")
    return value


def _details(document: dict[str, Any], field: str) -> dict[str, Any]:
    value = document.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageObjectError(f"usage {field}: not an object")
    return value


def _part(part: int, whole: int, part_name: str, whole_name: str) -> None:
    if part > whole:
        raise UsageObjectError(f"usage {part_name} ({part}) is larger than {whole_name} ({whole})")


def anthropic_tokens(usage: dict[str, Any]) -> TokenCounts:
    """Token counts of an Anthropic Messages ``usage`` object.

    Raises:
        UsageObjectError: a required field is missing or a count is malformed.
    """
    uncached = _count(usage, "input_tokens", required=True)
    output = _count(usage, "output_tokens", required=True)
    writes = _count(usage, "cache_creation_input_tokens")
    reads = _count(usage, "cache_read_input_tokens")
    split = _details(usage, "cache_creation")
    where = "cache_creation."
    five = _count(split, "ephemeral_5m_input_tokens", where=where)
    hour = _count(split, "ephemeral_1h_input_tokens", where=where)
    if split:
        _part(five + hour, writes, "cache_creation (5m + 1h)", "cache_creation_input_tokens")
        five = writes - hour  # writes the split does not assign are 5-minute writes
    else:
        five = writes
    return TokenCounts(
        input=uncached, cache_write_5m=five, cache_write_1h=hour, cache_read=reads, output=output
    )


def converse_tokens(usage: dict[str, Any]) -> TokenCounts:
    """Token counts of a Bedrock Converse ``usage`` object (``inputTokens`` are uncached).

    Raises:
        UsageObjectError: a required field is missing or a count is malformed.
    """
    return TokenCounts(
        input=_count(usage, "inputTokens", required=True),
        cache_write_5m=_count(usage, "cacheWriteInputTokens"),
        cache_read=_count(usage, "cacheReadInputTokens"),
        output=_count(usage, "outputTokens", required=True),
    )


def openai_tokens(usage: dict[str, Any]) -> TokenCounts:
    """Token counts of an OpenAI Chat Completions or Responses ``usage`` object.

    Chat Completions objects are recognised by ``prompt_tokens``, Responses
    objects by ``input_tokens``.

    Raises:
        UsageObjectError: a required field is missing or a count is malformed.
    """
    if "prompt_tokens" in usage or "input_tokens" not in usage:
        prompt = _count(usage, "prompt_tokens", required=True)
        completion = _count(usage, "completion_tokens", required=True)
        cached_name, reasoning_name = "prompt_tokens_details", "completion_tokens_details"
        prompt_name, completion_name = "prompt_tokens", "completion_tokens"
    else:
        prompt = _count(usage, "input_tokens", required=True)
        completion = _count(usage, "output_tokens", required=True)
        cached_name, reasoning_name = "input_tokens_details", "output_tokens_details"
        prompt_name, completion_name = "input_tokens", "output_tokens"
    cached = _count(_details(usage, cached_name), "cached_tokens", where=f"{cached_name}.")
    reasoning = _count(
        _details(usage, reasoning_name), "reasoning_tokens", where=f"{reasoning_name}."
    )
    _part(cached, prompt, f"{cached_name}.cached_tokens", prompt_name)
    _part(reasoning, completion, f"{reasoning_name}.reasoning_tokens", completion_name)
    return TokenCounts(
        input=prompt - cached, cache_read=cached, output=completion, reasoning=reasoning
    )


def gemini_tokens(usage: dict[str, Any]) -> TokenCounts:
    """Token counts of a Gemini ``usageMetadata`` object.

    Raises:
        UsageObjectError: a required field is missing or a count is malformed.
    """
    prompt = _count(usage, "promptTokenCount", required=True)
    cached = _count(usage, "cachedContentTokenCount")
    tool_prompt = _count(usage, "toolUsePromptTokenCount")
    answer = _count(usage, "candidatesTokenCount")
    thoughts = _count(usage, "thoughtsTokenCount")
    _part(cached, prompt, "cachedContentTokenCount", "promptTokenCount")
    return TokenCounts(
        input=prompt - cached + tool_prompt,
        cache_read=cached,
        output=answer + thoughts,
        reasoning=thoughts,
    )


def usage_tokens(provider: str, usage: Any) -> TokenCounts:
    """Token counts of ``provider``'s usage object.

    Raises:
        UsageObjectError: not an object, a provider without a known usage
            format, or a malformed object.
    """
    if not isinstance(usage, dict):
        raise UsageObjectError("usage object is not a JSON object")
    provider = usage_format(provider, usage)
    if provider == "bedrock-converse":
        return converse_tokens(usage)
    if provider == "anthropic":
        return anthropic_tokens(usage)
    if provider == "google":
        return gemini_tokens(usage)
    return openai_tokens(usage)
