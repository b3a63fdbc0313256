"""What a provider bills for a request, by its documented rules: the fake's ``bill`` scenario.

An honest worst-case upstream: every answer uses its whole output limit, text
is billed at one token per 3 UTF-8 bytes, and each provider's documented
extras are billed as its documentation states them (written here from those
pages, not from the product's estimate):

- Anthropic: the tool-use system prompt (346 tokens with any tools), the
  client tools' own prompts (bash 245, text editor 700), turn markers (4 a
  message, 10 a request), 1,500 tokens a PDF page, an image's ⌈w·h/750⌉
  after its resize to 1568 px, and each web fetch or search bringing in
  100,000 tokens of content up to the model's window;
- Gemini: the system instruction and parts in either spelling, 258 tokens an
  image tile, 258 a PDF page;
- OpenAI Chat Completions: 3 tokens a message and 3 to prime the answer, one
  more for a message's ``name``; images by the model's rule (tiles of 512 px
  after fitting in 2048 × 2048 and the short side to 768, 85 + 170 a tile on
  GPT-4o and GPT-4.1, 85 at ``detail: low``; 32-px patches, at most 1,536,
  times 1.62 on GPT-4.1 mini); a function tool's name, description and
  parameters as text.
"""

import base64
import io
import json
import math
from typing import Any

import imagesize
import pypdf

WINDOW = 2_000_000  # the test models' context window (none is known to the price table)
FETCHED_TOKENS = 100_000


def _text(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if value is None:
        return 0
    return len(
        json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )
    )


def _tokens(byte_count: int) -> int:
    return -(-byte_count // 3)


def _raw(data: Any) -> bytes:
    text = data.partition(",")[2] if isinstance(data, str) and data.startswith("data:") else data
    return base64.b64decode(text) if isinstance(text, str) else b""


def _pdf_pages(data: Any) -> int:
    return len(pypdf.PdfReader(io.BytesIO(_raw(data))).pages)


def _claude_image(data: Any) -> int:
    width, height = imagesize.get(io.BytesIO(_raw(data)))
    scale = min(1.0, 1568 / max(width, height))
    pixels = math.floor(width * scale) * math.floor(height * scale)
    tokens: int = min(1600, math.ceil(pixels / 750))
    return tokens


def _claude_content(content: Any) -> int:
    if isinstance(content, str):
        return _tokens(_text(content))
    tokens = 0
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            tokens += _tokens(_text(block["text"]))
        elif kind == "image":
            tokens += _claude_image(block["source"]["data"])
        elif kind == "document":
            tokens += 1500 * _pdf_pages(block["source"]["data"])
        elif kind == "tool_use":
            tokens += _tokens(_text(block["name"]) + _text(block["input"]))
        elif kind == "tool_result":
            tokens += _claude_content(block.get("content"))
        else:
            tokens += _tokens(_text(block))
    return tokens


def anthropic_usage(request: dict[str, Any]) -> dict[str, int]:
    """The usage Claude reports for ``request``, answered to its whole max_tokens."""
    tokens = 10 + _claude_content(request.get("system"))
    for message in request.get("messages") or []:
        tokens += 4 + _claude_content(message.get("content"))
    tools = request.get("tools") or []
    if tools:
        tokens += 346
    fetched = 0
    for tool in tools:
        kind = str(tool.get("type") or "custom")
        if kind.startswith("bash"):
            tokens += 245
        elif kind.startswith("text_editor"):
            tokens += 700
        elif kind.startswith(("web_fetch", "web_search")):
            fetched += int(tool.get("max_uses") or 10) * FETCHED_TOKENS
        else:
            fields = (tool.get("name"), tool.get("description"), tool.get("input_schema"))
            tokens += _tokens(sum(_text(field) for field in fields))
    tokens = min(WINDOW, tokens + fetched)
    return {"input_tokens": tokens, "output_tokens": int(request.get("max_tokens") or 0)}


def _either(value: Any, camel: str, snake: str) -> Any:
    return (value or {}).get(camel, (value or {}).get(snake))


def _gemini_parts(content: Any) -> int:
    tokens = 0
    for part in _either(content, "parts", "parts") or []:
        blob = _either(part, "inlineData", "inline_data")
        if "text" in part:
            tokens += _tokens(_text(part["text"]))
        elif blob is not None and str(_either(blob, "mimeType", "mime_type")).startswith("image/"):
            width, height = imagesize.get(io.BytesIO(_raw(blob["data"])))
            unit = min(768, max(256, math.floor(min(width, height) / 1.5)))
            small = width <= 384 and height <= 384
            tokens += 258 * (1 if small else math.ceil(width / unit) * math.ceil(height / unit))
        elif blob is not None:
            tokens += 258 * _pdf_pages(blob["data"])
        else:
            tokens += _tokens(_text(part))
    return tokens


def gemini_usage(request: dict[str, Any]) -> dict[str, int]:
    """The usageMetadata Gemini reports for ``request``, answered to its whole output limit."""
    prompt = _gemini_parts(_either(request, "systemInstruction", "system_instruction"))
    for content in request.get("contents") or []:
        prompt += _gemini_parts(content)
    config = _either(request, "generationConfig", "generation_config")
    output = int(_either(config, "maxOutputTokens", "max_output_tokens") or 0)
    return {"promptTokenCount": prompt, "candidatesTokenCount": output,
            "totalTokenCount": prompt + output}  # fmt: skip


def _openai_image(model: str, url: str, detail: Any) -> int:
    size: tuple[int, int] = imagesize.get(io.BytesIO(_raw(url)))
    width, height = size
    if model.startswith("gpt-4.1-mini"):
        patches = math.ceil(width / 32) * math.ceil(height / 32)
        return math.ceil(min(1536, patches) * 1.62)
    if detail == "low":
        return 85
    fit = min(1.0, 2048 / max(width, height))
    width, height = math.floor(width * fit), math.floor(height * fit)
    short = min(1.0, 768 / min(width, height))
    width, height = math.floor(width * short), math.floor(height * short)
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def _openai_content(model: str, content: Any) -> int:
    if isinstance(content, str):
        return _tokens(_text(content))
    tokens = 0
    for part in content or []:
        if part.get("type") == "text":
            tokens += _tokens(_text(part["text"]))
        elif part.get("type") == "image_url":
            image = part["image_url"]
            tokens += _openai_image(model, image["url"], image.get("detail"))
        else:
            tokens += _tokens(_text(part))
    return tokens


def openai_chat_usage(request: dict[str, Any]) -> dict[str, int]:
    """The usage Chat Completions reports for ``request``, answered to its whole limit."""
    model = str(request["model"])
    prompt = 3
    for message in request.get("messages") or []:
        prompt += 3 + _openai_content(model, message.get("content"))
        if message.get("name"):
            prompt += 1 + _tokens(_text(message["name"]))
    for tool in request.get("tools") or []:
        function = tool.get("function") or {}
        fields = (function.get("name"), function.get("description"), function.get("parameters"))
        prompt += _tokens(sum(_text(field) for field in fields))
    output = int(request.get("max_completion_tokens") or request.get("max_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": output,
            "total_tokens": prompt + output}  # fmt: skip
