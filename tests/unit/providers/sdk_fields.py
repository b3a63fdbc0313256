"""Every request field, content part, tool type and beta the official SDKs can send.

Read from the installed SDKs' own request types (the Anthropic and OpenAI
Python SDKs' create-params TypedDicts and their unions, google-genai's
pydantic request models), so a new SDK release that adds one shows here.
"""

import types
import typing
from typing import Any


def typed_dict_keys(*typed_dicts: Any) -> set[str]:
    """The keys of TypedDicts."""
    return {key for typed in typed_dicts for key in typing.get_type_hints(typed)}


def _members(union: Any) -> list[Any]:
    origin = typing.get_origin(union)
    if origin is typing.Annotated:
        return _members(typing.get_args(union)[0])
    if origin is typing.Union or isinstance(union, types.UnionType):
        return [member for arg in typing.get_args(union) for member in _members(arg)]
    return [union]


def type_literals(*unions: Any) -> set[str]:
    """The ``type`` values of every TypedDict in the unions (request params only)."""
    found: set[str] = set()
    for union in unions:
        for member in _members(union):
            if not hasattr(member, "__required_keys__"):
                continue  # a response model that a union also admits
            hint = typing.get_type_hints(member).get("type")
            for arg in _literals(hint):
                found.add(arg)
    return found


def _literals(hint: Any) -> list[str]:
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return [arg for arg in typing.get_args(hint) if isinstance(arg, str)]
    return [literal for arg in typing.get_args(hint) for literal in _literals(arg)]


def anthropic_fields() -> dict[str, set[str]]:
    from anthropic import types as plain
    from anthropic.types import beta, message_create_params
    from anthropic.types.beta import message_create_params as beta_params

    return {
        "fields": typed_dict_keys(
            message_create_params.MessageCreateParamsNonStreaming,
            message_create_params.MessageCreateParamsStreaming,
            beta_params.MessageCreateParamsNonStreaming,
            beta_params.MessageCreateParamsStreaming,
        ),
        "blocks": type_literals(plain.ContentBlockParam, beta.BetaContentBlockParam),
        "tools": type_literals(plain.ToolUnionParam, beta.BetaToolUnionParam),
        "betas": set(_literals(plain.AnthropicBetaParam)),
    }


def openai_fields() -> dict[str, set[str]]:
    from openai.types import chat, responses
    from openai.types.chat import completion_create_params
    from openai.types.responses import response_create_params

    return {
        "chat fields": typed_dict_keys(
            completion_create_params.CompletionCreateParamsNonStreaming,
            completion_create_params.CompletionCreateParamsStreaming,
        ),
        "chat parts": type_literals(
            chat.ChatCompletionContentPartParam, chat.ChatCompletionContentPartRefusalParam
        ),
        "chat tools": type_literals(chat.ChatCompletionToolUnionParam),
        "responses fields": typed_dict_keys(
            response_create_params.ResponseCreateParamsNonStreaming,
            response_create_params.ResponseCreateParamsStreaming,
        ),
        "responses items": type_literals(responses.ResponseInputItemParam),
        "responses parts": type_literals(
            responses.ResponseInputContentParam,
            responses.ResponseOutputTextParam,
            responses.ResponseOutputRefusalParam,
        ),
        "responses tools": type_literals(responses.ToolParam),
    }


def gemini_fields() -> dict[str, set[str]]:
    from google.genai import types as genai

    def names(model: Any) -> set[str]:
        return set(model.model_fields)

    return {
        "config": names(genai.GenerateContentConfig),
        "generation config": names(genai.GenerationConfig),
        "content": names(genai.Content),
        "part": names(genai.Part),
        "tool": names(genai.Tool),
        "declaration": names(genai.FunctionDeclaration),
    }
