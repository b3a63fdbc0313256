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

**By modality.** OpenAI's ``prompt_tokens_details.audio_tokens`` /
``image_tokens`` (``input_tokens_details`` in the Responses API) are parts of
the input, ``completion_tokens_details.audio_tokens`` / ``image_tokens``
(``output_tokens_details``) parts of the output; Gemini's
``promptTokensDetails``, ``cacheTokensDetails`` and ``candidatesTokensDetails``
split the prompt, its cached part and the answer by modality (``AUDIO``,
``IMAGE``, ``VIDEO``; ``TEXT`` and ``DOCUMENT`` are text). Each part is priced
at its own rate (``ledger.core.prices``).

**What is not known.** A count the product does not know — a ``*_tokens``
field (``*TokenCount`` / ``*TokensDetails`` for Gemini) not named above, a
modality it has no kind for, a server tool use other than web search and
fetch — is never taken as free: ``UsageReading.unknown`` names it, and the
record is then at least the call's estimate. A missing required field, a
negative or non-integer count, or a part larger than the whole it belongs to
is an error. The call's service tier (Anthropic ``usage.service_tier``; for
OpenAI the response's ``service_tier``, which the usage readers copy into the
usage object) is ``UsageReading.service_tier``.
"""

from typing import Any, NamedTuple

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


class UsageReading(NamedTuple):
    """A usage object read: its token counts, what it reports that is not known, its tier."""

    tokens: TokenCounts
    unknown: tuple[str, ...] = ()
    service_tier: str | None = None


# The count fields each format has that are read (or are sums of those read).
_ANTHROPIC_KNOWN = frozenset(
    {"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
     "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}
)  # fmt: skip
# Server tools billed beside their tokens: web search (priced by its fee); web
# fetch costs only the tokens it brings in.
_ANTHROPIC_TOOLS = frozenset({"web_search_requests", "web_fetch_requests"})
# Bedrock Converse's usage (camelCase counts).
_CONVERSE_KNOWN = frozenset(
    {"inputTokens", "outputTokens", "totalTokens", "cacheReadInputTokens",
     "cacheWriteInputTokens"}
)  # fmt: skip
_OPENAI_KNOWN = frozenset(
    {"prompt_tokens", "completion_tokens", "total_tokens", "input_tokens", "output_tokens",
     "cached_tokens", "reasoning_tokens", "audio_tokens", "image_tokens", "text_tokens",
     # Predicted output: both are in completion_tokens, billed as output.
     "accepted_prediction_tokens", "rejected_prediction_tokens",
     # DeepSeek's split of prompt_tokens (its parts, priced as input).
     "prompt_cache_hit_tokens", "prompt_cache_miss_tokens"}
)  # fmt: skip
_GEMINI_KNOWN = frozenset(
    {"promptTokenCount", "cachedContentTokenCount", "toolUsePromptTokenCount",
     "candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount", "promptTokensDetails",
     "cacheTokensDetails", "candidatesTokensDetails", "toolUsePromptTokensDetails"}
)  # fmt: skip
# How deep a usage object's details are searched for counts not known.
_MAX_NESTING = 3
_GEMINI_MODALITIES = frozenset({"TEXT", "DOCUMENT", "AUDIO", "IMAGE", "VIDEO"})


def _unknown_counts(
    document: Any, known: frozenset[str], where: str = "", depth: int = 0
) -> list[str]:
    """Count fields (``*_tokens``, ``*TokenCount``, ``*TokensDetails``) not known, with a value."""
    found: list[str] = []
    if not isinstance(document, dict) or depth > _MAX_NESTING:
        return found
    for key, value in document.items():
        name = str(key)
        if isinstance(value, dict):
            found.extend(_unknown_counts(value, known, f"{where}{name}.", depth + 1))
            continue
        counts = name.endswith(("_tokens", "TokenCount", "TokensDetails"))
        if counts and name not in known and value not in (None, 0, [], {}):
            found.append(f"{where}{name}")
    return found


def _tier(usage: dict[str, Any]) -> str | None:
    tier = usage.get("service_tier")
    return tier if isinstance(tier, str) and tier else None


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
    inputs, outputs = _details(usage, cached_name), _details(usage, reasoning_name)
    cached = _count(inputs, "cached_tokens", where=f"{cached_name}.")
    reasoning = _count(outputs, "reasoning_tokens", where=f"{reasoning_name}.")
    audio_in = _count(inputs, "audio_tokens", where=f"{cached_name}.")
    image_in = _count(inputs, "image_tokens", where=f"{cached_name}.")
    audio_out = _count(outputs, "audio_tokens", where=f"{reasoning_name}.")
    image_out = _count(outputs, "image_tokens", where=f"{reasoning_name}.")
    _part(cached, prompt, f"{cached_name}.cached_tokens", prompt_name)
    _part(reasoning, completion, f"{reasoning_name}.reasoning_tokens", completion_name)
    _part(audio_out + image_out, completion, f"{reasoning_name} audio + image", completion_name)
    # Cached tokens are not split by modality here: the modal parts are taken
    # as uncached (the dearer reading), at most the uncached input.
    uncached = prompt - cached
    audio_in = min(audio_in, uncached)
    image_in = min(image_in, uncached - audio_in)
    return TokenCounts(
        input=uncached, cache_read=cached, output=completion, reasoning=reasoning,
        input_audio=audio_in, input_image=image_in, output_audio=audio_out,
        output_image=image_out,
    )  # fmt: skip


def _by_modality(usage: dict[str, Any], field: str, unknown: list[str]) -> dict[str, int]:
    """A Gemini ``*TokensDetails`` list as counts by modality (unknown modalities noted)."""
    value = usage.get(field)
    if value is None:
        return {}
    if not isinstance(value, list):
        raise UsageObjectError(f"usage {field}: not a list")
    counts: dict[str, int] = {}
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise UsageObjectError(f"usage {field}[{index}]: not an object")
        modality = item.get("modality")
        count = _count(item, "tokenCount", where=f"{field}[{index}].")
        if not isinstance(modality, str) or modality not in _GEMINI_MODALITIES:
            if count:
                unknown.append(f"{field}.{modality}")
            modality = "TEXT"
        counts[modality] = counts.get(modality, 0) + count
    return counts


def gemini_reading(usage: dict[str, Any]) -> UsageReading:
    """A Gemini ``usageMetadata`` object read by kind and modality.

    Raises:
        UsageObjectError: a required field is missing or a count is malformed.
    """
    prompt = _count(usage, "promptTokenCount", required=True)
    cached = _count(usage, "cachedContentTokenCount")
    tool_prompt = _count(usage, "toolUsePromptTokenCount")
    answer = _count(usage, "candidatesTokenCount")
    thoughts = _count(usage, "thoughtsTokenCount")
    _part(cached, prompt, "cachedContentTokenCount", "promptTokenCount")
    unknown = _unknown_counts(usage, _GEMINI_KNOWN)
    prompt_parts = _by_modality(usage, "promptTokensDetails", unknown)
    cache_parts = _by_modality(usage, "cacheTokensDetails", unknown)
    tool_parts = _by_modality(usage, "toolUsePromptTokensDetails", unknown)
    answer_parts = _by_modality(usage, "candidatesTokensDetails", unknown)

    def uncached(modality: str) -> int:
        part = prompt_parts.get(modality, 0) - cache_parts.get(modality, 0)
        return max(part, 0) + tool_parts.get(modality, 0)

    uncached_input = prompt - cached + tool_prompt
    audio_in = min(uncached("AUDIO"), uncached_input)
    image_in = min(uncached("IMAGE"), uncached_input - audio_in)
    video_in = min(uncached("VIDEO"), uncached_input - audio_in - image_in)
    cached_audio = min(cache_parts.get("AUDIO", 0), cached)
    cached_image = min(cache_parts.get("IMAGE", 0), cached - cached_audio)
    audio_out = answer_parts.get("AUDIO", 0)
    image_out = answer_parts.get("IMAGE", 0)
    _part(audio_out + image_out, answer, "candidatesTokensDetails AUDIO + IMAGE",
          "candidatesTokenCount")  # fmt: skip
    tokens = TokenCounts(
        input=uncached_input, cache_read=cached, output=answer + thoughts, reasoning=thoughts,
        input_audio=audio_in, input_image=image_in, input_video=video_in,
        cache_audio_read=cached_audio, cache_image_read=cached_image,
        output_audio=audio_out, output_image=image_out,
    )  # fmt: skip
    return UsageReading(tokens, tuple(unknown))


def gemini_tokens(usage: dict[str, Any]) -> TokenCounts:
    """Token counts of a Gemini ``usageMetadata`` object.

    Raises:
        UsageObjectError: a required field is missing or a count is malformed.
    """
    return gemini_reading(usage).tokens


def usage_reading(provider: str, usage: Any) -> UsageReading:
    """``provider``'s usage object read: token counts, unknown counts, service tier.

    Raises:
        UsageObjectError: not an object, or a malformed object.
    """
    if not isinstance(usage, dict):
        raise UsageObjectError("usage object is not a JSON object")
    # The clouds serve other providers' formats (Claude on Bedrock and Vertex, Azure's OpenAI).
    provider = usage_format(provider, usage)
    if provider == "bedrock-converse":
        return UsageReading(
            converse_tokens(usage), tuple(_unknown_counts(usage, _CONVERSE_KNOWN)), None
        )
    if provider == "anthropic":
        tokens = anthropic_tokens(usage)
        unknown = _unknown_counts(
            {k: v for k, v in usage.items() if k != "server_tool_use"}, _ANTHROPIC_KNOWN
        )
        tools = usage.get("server_tool_use")
        if isinstance(tools, dict):
            unknown.extend(
                f"server_tool_use.{name}"
                for name, value in tools.items()
                if name not in _ANTHROPIC_TOOLS and value not in (None, 0)
            )
        return UsageReading(tokens, tuple(unknown), _tier(usage))
    if provider == "google":
        return gemini_reading(usage)
    return UsageReading(
        openai_tokens(usage), tuple(_unknown_counts(usage, _OPENAI_KNOWN)), _tier(usage)
    )


def usage_tokens(provider: str, usage: Any) -> TokenCounts:
    """Token counts of ``provider``'s usage object.

    Raises:
        UsageObjectError: not an object, a provider without a known usage
            format, or a malformed object.
    """
    return usage_reading(provider, usage).tokens
