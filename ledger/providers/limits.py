"""Each wire format's output limit: where a request states it, and how it is set.

A request's output limit bounds what it may cost, so it is read for the
estimate; a request without one gets one from the gateway, and a request that
does not fit what is left of a budget gets a lower one (the clamp). Both are
written into the body forwarded upstream, here, where the field names are
known:

- Anthropic Messages: ``max_tokens``; ``thinking.budget_tokens`` must stay
  below it (and at least 1,024), so it is lowered, or thinking is turned off
  when no budget that small is allowed.
- OpenAI Chat Completions: ``max_completion_tokens`` (or the older
  ``max_tokens``), for each of ``n`` choices.
- OpenAI Responses: ``max_output_tokens`` (reasoning included).
- Gemini: ``generationConfig.maxOutputTokens`` (thinking included);
  ``generationConfig.thinkingConfig.thinkingBudget`` is lowered to it. Gemini
  takes every name in snake_case too (``generation_config.max_output_tokens``):
  both are read, and a limit is written in the spelling the request used.

Reasoning budgets some OpenAI-compatible routers take (``reasoning.max_tokens``)
are lowered to the limit as well.
"""

import json
import re
from typing import Any

from ledger.errors import UsageError

# The smallest thinking budget Anthropic accepts.
ANTHROPIC_MIN_THINKING_TOKENS = 1024

OUTPUT_LIMIT_FIELDS: dict[str, tuple[str, ...]] = {
    "messages": ("max_tokens",),
    "chat_completions": ("max_completion_tokens", "max_tokens"),
    "responses": ("max_output_tokens",),
    "generate_content": ("generationConfig.maxOutputTokens",),
}


class RequestRefused(UsageError):  # noqa: N818 - the name the gateway and guards share
    """A request that cannot be estimated, so it must not be sent (exit code 2)."""


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


def _stated(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        value = _field(value, part)
    return value


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda found: "_" + found.group(1).lower(), name)


def _spellings(value: Any, name: str) -> list[str]:
    """The spellings of camelCase ``name`` an object uses (Gemini takes both)."""
    if not isinstance(value, dict):
        return []
    return [spelling for spelling in dict.fromkeys((name, _snake(name))) if spelling in value]


def _gemini_stated(document: dict[str, Any], path: str) -> list[Any]:
    """Every value at ``path`` in any mix of camelCase and snake_case."""
    values: list[Any] = [document]
    for part in path.split("."):
        values = [value[name] for value in values for name in _spellings(value, part)]
    return values


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def read_output_limit(kind: str, document: dict[str, Any]) -> int | None:
    """The output limit a request states for each choice (the largest field given), or ``None``.

    Raises:
        RequestRefused: a limit field is given but is not a positive integer.
    """
    limits = []
    for name in OUTPUT_LIMIT_FIELDS[kind]:
        found = (
            _gemini_stated(document, name)
            if kind == "generate_content"
            else [_stated(document, name)]
        )
        for value in found:
            if value is None:
                continue
            if not _positive(value):
                raise RequestRefused(f"the request's {name} is not a positive integer: {value!r}")
            limits.append(value)
    return max(limits) if limits else None


def choices(kind: str, document: dict[str, Any]) -> int:
    """How many answers a request asks for (Chat Completions ``n``, Gemini ``candidateCount``)."""
    count: Any = None
    if kind == "chat_completions":
        count = document.get("n")
    elif kind == "generate_content":
        counts = _gemini_stated(document, "generationConfig.candidateCount")
        return max([int(value) for value in counts if _positive(value)], default=1)
    return int(count) if _positive(count) else 1


def missing_limit_message(kind: str) -> str:
    """Why a request without an output limit cannot be bounded."""
    names = " or ".join(OUTPUT_LIMIT_FIELDS[kind])
    return f"the request has no output limit ({names}), so its cost has no upper bound"


def write_output_limit(
    kind: str, document: dict[str, Any], tokens: int, *, chat_field: str = "max_completion_tokens"
) -> None:
    """Set the request's output limit (for each choice) to ``tokens``, in place.

    Every limit field the request already gives is set, so no older field is
    left above the new limit; a request that gives none gets ``chat_field``
    for Chat Completions (``max_tokens`` for upstreams that know no other).
    Any thinking or reasoning budget is lowered below the new limit.
    """
    if tokens < 1:
        raise ValueError("an output limit is at least 1 token")
    if kind == "messages":
        document["max_tokens"] = tokens
        _lower_anthropic_thinking(document, tokens)
    elif kind == "chat_completions":
        given = [name for name in OUTPUT_LIMIT_FIELDS[kind] if document.get(name) is not None]
        for name in given or [chat_field]:
            document[name] = tokens
    elif kind == "responses":
        document["max_output_tokens"] = tokens
    elif kind == "generate_content":
        _write_gemini_limit(document, tokens)
    else:
        raise ValueError(f"no output limit for a {kind} request")
    reasoning = document.get("reasoning")
    budget = _field(reasoning, "max_tokens")
    if isinstance(reasoning, dict) and _positive(budget) and budget >= tokens:
        reasoning["max_tokens"] = max(1, tokens - 1)


def _write_gemini_limit(document: dict[str, Any], tokens: int) -> None:
    """Set every generation config's output limit, in the spelling the request used."""
    names = _spellings(document, "generationConfig")
    if not names:
        # No config given: one in the spelling of the request's other fields.
        snake_request = any("_" in key for key in document)
        names = ["generation_config" if snake_request else "generationConfig"]
    for name in names:
        config = document.get(name)
        if not isinstance(config, dict):
            config = document[name] = {}
        snake_config = name == "generation_config" or any("_" in key for key in config)
        limits = _spellings(config, "maxOutputTokens") or [
            "max_output_tokens" if snake_config else "maxOutputTokens"
        ]
        for limit in limits:
            config[limit] = tokens
        for thinking_name in _spellings(config, "thinkingConfig"):
            thinking = config[thinking_name]
            # -1 asks the model to choose: bounded by the output limit all the same.
            for budget_name in _spellings(thinking, "thinkingBudget"):
                budget = thinking[budget_name]
                if _positive(budget) and budget > tokens:
                    thinking[budget_name] = tokens


def body_bytes(document: dict[str, Any]) -> bytes:
    """The JSON body to send for ``document``.

    Text that UTF-8 cannot carry (a lone surrogate a client's truncation left)
    goes as the JSON escape it arrived as, so the upstream judges it.

    Raises:
        RequestRefused: the document nests too deeply to be written.
    """
    try:
        try:
            text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(document, separators=(",", ":")).encode("ascii")
    except RecursionError as exc:
        raise RequestRefused("the request body nests too deeply to be sent") from exc


def _lower_anthropic_thinking(document: dict[str, Any], tokens: int) -> None:
    thinking = document.get("thinking")
    budget = _field(thinking, "budget_tokens")
    if not isinstance(thinking, dict) or not _positive(budget) or budget < tokens:
        return
    if tokens - 1 >= ANTHROPIC_MIN_THINKING_TOKENS:
        thinking["budget_tokens"] = tokens - 1
    else:  # no thinking budget below this limit is allowed: answer without thinking
        document["thinking"] = {"type": "disabled"}


def limited_body(
    kind: str, document: dict[str, Any], tokens: int, *, chat_field: str = "max_completion_tokens"
) -> bytes:
    """The body to send with its output limit set to ``tokens`` (``document`` is changed)."""
    write_output_limit(kind, document, tokens, chat_field=chat_field)
    return body_bytes(document)
