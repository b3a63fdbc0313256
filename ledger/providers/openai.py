"""OpenAI's wire format: Chat Completions and Responses request estimates.

Every request field, message part, input item and tool type this estimate
knows is listed below with its rule (``ledger.providers.tally``); anything
else counts as the model's context window. Chat Completions ``messages`` and
Responses ``input`` share their content part kinds. A response's usage is
read in ``ledger.providers.openai_usage``.
"""

import math
from typing import Any

from ledger.providers import media
from ledger.providers.tally import OUTPUT, SETTING, TEXT, WALKED, WINDOW, Tally, field, items

_COMMON_FIELDS: dict[str, str] = {
    "model": SETTING,
    "stream": SETTING,
    "stream_options": SETTING,
    "metadata": SETTING,
    "temperature": SETTING,
    "top_p": SETTING,
    "top_logprobs": SETTING,
    "parallel_tool_calls": SETTING,
    "tool_choice": SETTING,
    "tools": WALKED,
    "store": SETTING,
    "user": SETTING,
    "safety_identifier": SETTING,
    "service_tier": SETTING,  # priced by the price table's tier rates
    "prompt_cache_key": SETTING,
    "client_metadata": SETTING,  # the client's labels for the call (Codex sends them)
    "prompt_cache_retention": SETTING,
    "prompt_cache_options": SETTING,
    "reasoning": SETTING,  # its effort (and a router's max_tokens) within the output limit
    "moderation": WINDOW,  # a moderation pass the price table does not price
}
CHAT_FIELDS: dict[str, str] = _COMMON_FIELDS | {
    "messages": WALKED,
    "functions": WALKED,
    "function_call": SETTING,  # the older tool_choice
    "response_format": WALKED,  # its json_schema reaches the model
    "max_completion_tokens": OUTPUT,
    "max_tokens": OUTPUT,
    "n": OUTPUT,
    "prediction": TEXT,  # predicted output, read by the model
    "audio": SETTING,  # the voice of an audio answer, within the output limit
    "modalities": SETTING,
    "frequency_penalty": SETTING,
    "presence_penalty": SETTING,
    "logit_bias": SETTING,
    "logprobs": SETTING,
    "seed": SETTING,
    "stop": SETTING,
    "reasoning_effort": SETTING,
    "verbosity": SETTING,
    "web_search_options": WINDOW,  # search results fill the context; one search is priced
    # Sampling settings OpenAI-compatible servers take.
    "top_k": SETTING,
    "min_p": SETTING,
    "repetition_penalty": SETTING,
}
RESPONSES_FIELDS: dict[str, str] = _COMMON_FIELDS | {
    "input": WALKED,
    "instructions": WALKED,
    "text": WALKED,  # its format's schema reaches the model
    "max_output_tokens": OUTPUT,
    "max_tool_calls": SETTING,  # bounds the priced tool calls
    "include": SETTING,
    "background": SETTING,
    "truncation": SETTING,
    "previous_response_id": WALKED,  # sized by the gate: a response recorded here, else the window
    # Stored or referenced input, and passes the body does not show.
    "conversation": WINDOW,
    "prompt": WINDOW,
    "context_management": WINDOW,
    "background_options": WINDOW,
    "access_programs": WINDOW,
    "image": WINDOW,
}

PART_TYPES: dict[str, str] = {
    "text": TEXT,
    "input_text": TEXT,
    "output_text": TEXT,
    "refusal": TEXT,
    "image_url": "tile or patch formula per model; by URL or file id the context window",
    "input_image": "tile or patch formula per model; by URL or file id the context window",
    "file": "PDF pages × per-page bound; by file id the context window",
    "input_file": "PDF pages × per-page bound; by file id or URL the context window",
    "input_audio": "its base64 bytes as text",
}
# Responses input items. Items held whole in the body count as their JSON text.
ITEM_TYPES: dict[str, str] = {
    "message": WALKED,
    "function_call": TEXT,
    "function_call_output": WALKED,
    "custom_tool_call": TEXT,
    "custom_tool_call_output": WALKED,
    "computer_call_output": WALKED,  # a screenshot, as an image part
    "reasoning": TEXT,
    "web_search_call": TEXT,
    "file_search_call": TEXT,
    "computer_call": TEXT,
    "code_interpreter_call": TEXT,
    "image_generation_call": TEXT,
    "local_shell_call": TEXT,
    "local_shell_call_output": TEXT,
    "shell_call": TEXT,
    "shell_call_output": TEXT,
    "apply_patch_call": TEXT,
    "apply_patch_call_output": TEXT,
    "mcp_list_tools": TEXT,
    "mcp_approval_request": TEXT,
    "mcp_approval_response": TEXT,
    "mcp_call": TEXT,
    "tool_search_call": TEXT,
    "tool_search_output": TEXT,
    "additional_tools": TEXT,
    "program": TEXT,
    "program_output": TEXT,
    # Stored input, or a pass over it, the body does not hold.
    "item_reference": WINDOW,
    "compaction": WINDOW,
    "compaction_trigger": WINDOW,
    "configuration_update": WINDOW,
}
TOOL_TYPES: dict[str, str] = {
    "function": TEXT,  # name, description, parameters, plus TOOL_TOKENS
    "custom": TEXT,
    "namespace": TEXT,
    "local_shell": TEXT,
    "shell": TEXT,
    "apply_patch": TEXT,
    # Tools the provider runs: what they bring into the context is unseen here;
    # searches and calls are priced (server_tools).
    "web_search": WINDOW,
    "web_search_2025_08_26": WINDOW,
    "web_search_preview": WINDOW,
    "web_search_preview_2025_03_11": WINDOW,
    "file_search": WINDOW,
    "code_interpreter": WINDOW,
    "image_generation": WINDOW,
    "mcp": WINDOW,
    "computer": WINDOW,
    "computer_use_preview": WINDOW,
    "tool_search": WINDOW,
    "programmatic_tool_calling": WINDOW,
}

# Framing, from OpenAI's cookbook "How to count tokens with tiktoken": 3
# tokens per message and 1 per name, 3 priming the reply; each function
# definition 7 to open and 12 to close (gpt-4o family), and the tool
# preamble's namespace wrapper, bounded here by 16 per request.
MESSAGE_TOKENS = 4
REQUEST_TOKENS = 3 + 16
TOOL_TOKENS = 7 + 12

# Images (platform.openai.com "Images and vision", "Calculating costs").
# Patch models: 32-px patches, at most 1,536, times the model's multiplier.
PATCH_MULTIPLIERS = {
    "gpt-4.1-mini": 1.62, "gpt-4.1-nano": 2.46, "o4-mini": 1.72,
    "gpt-5-mini": 1.62, "gpt-5-nano": 2.46,
}  # fmt: skip
MAX_PATCHES = 1536
# Tile models: fit in 2048 × 2048, short side to 768, 512-px tiles: (base, per tile).
TILE_RULES = {
    "gpt-4o-mini": (2833, 5667), "gpt-4o": (85, 170), "gpt-4.1": (85, 170),
    "gpt-4.5": (85, 170), "gpt-5": (70, 140), "o1": (75, 150), "o3": (75, 150),
    "computer-use-preview": (65, 129), "chatgpt-4o": (85, 170),
}  # fmt: skip
MAX_TILES = 8  # 2048 × 768 after the resize: 4 × 2 tiles
# PDFs: each page's extracted text and an image of the page (the "File
# inputs" guide); a page's text is bounded at 3,000 tokens.
PDF_PAGE_TEXT_TOKENS = 3000


def _match(table: dict[str, Any], model: str) -> str:
    """The longest key of ``table`` that ``model`` starts with ("" when none does)."""
    matches = [key for key in table if model.startswith(key)]
    return max(matches, key=len) if matches else ""


def image_tokens(model: str, size: tuple[int, int] | None, detail: Any = None) -> int:
    """What ``model`` bills for an image of ``size`` (None: its largest), by its family's rule.

    A model of no known family is billed the largest any rule gives.
    """
    patch, tile = _match(PATCH_MULTIPLIERS, model), _match(TILE_RULES, model)
    if patch and len(patch) >= len(tile):
        return _patch_tokens(size, PATCH_MULTIPLIERS[patch])
    if tile:
        return _tile_tokens(size, *TILE_RULES[tile], low=detail == "low")
    patches = [_patch_tokens(size, rate) for rate in PATCH_MULTIPLIERS.values()]
    tiled = [_tile_tokens(size, *rule, low=False) for rule in TILE_RULES.values()]
    return max(patches + tiled)


def _patch_tokens(size: tuple[int, int] | None, multiplier: float) -> int:
    patches = MAX_PATCHES
    if size is not None:
        patches = min(MAX_PATCHES, math.ceil(size[0] / 32) * math.ceil(size[1] / 32))
    return math.ceil(patches * multiplier)


def _tile_tokens(size: tuple[int, int] | None, base: int, per_tile: int, *, low: bool) -> int:
    if low:
        return base
    if size is None:
        return base + per_tile * MAX_TILES
    width, height = media.fit(*size, 2048)
    width, height = media.scaled(width, height, min(1.0, 768 / min(width, height)))
    return base + per_tile * math.ceil(width / 512) * math.ceil(height / 512)


class _Walker:
    """One request's walk: the model decides what an image or PDF page costs."""

    def __init__(self, tally: Tally, model: str) -> None:
        self.tally = tally
        self.model = model

    def content(self, content: Any) -> None:
        if isinstance(content, str) or not isinstance(content, list):
            self.tally.text(content)
            return
        for part in content:
            self.part(part)

    def part(self, part: Any) -> None:
        tally = self.tally
        kind = field(part, "type")
        if not isinstance(kind, str) or kind not in PART_TYPES:
            tally.window(f"content part {kind!r}")
        elif kind in {"text", "input_text", "output_text"}:
            tally.text(part.get("text"))
        elif kind == "refusal":
            tally.text(part.get("refusal"))
        elif kind in {"image_url", "input_image"}:
            self.image(part)
        elif kind == "file":  # Chat Completions: {"file": {"file_data": "data:…;base64,…"}}
            file = part.get("file")
            self.pdf(field(file, "file_data"), field(file, "filename"))
        elif kind == "input_file":  # Responses
            self.pdf(part.get("file_data"), part.get("filename"))
        else:  # input_audio
            tally.base64(field(part.get("input_audio"), "data"))

    def image(self, part: dict[str, Any]) -> None:
        url = part.get("image_url")
        detail = part.get("detail")
        if isinstance(url, dict):
            detail = url.get("detail")
            url = url.get("url")
        if part.get("file_id") is not None or not (
            isinstance(url, str) and url.startswith("data:")
        ):
            self.tally.window("image by reference")
            return
        self.tally.image(image_tokens(self.model, media.image_size(url), detail))

    def pdf(self, data: Any, filename: Any) -> None:
        if data is None:
            self.tally.window("file by id or URL")
            return
        pages = media.pdf_pages(data)
        if pages is None:
            self.tally.window("unreadable file")
            return
        self.tally.text(filename)
        self.tally.add(pages * (PDF_PAGE_TEXT_TOKENS + image_tokens(self.model, None)))

    def tool(self, tool: Any) -> None:
        tally = self.tally
        tally.add(TOOL_TOKENS)
        kind = field(tool, "type")
        if kind is None and isinstance(tool, dict) and "name" in tool:
            kind = "function"  # the older functions list
        rule = TOOL_TYPES.get(kind) if isinstance(kind, str) else None
        if rule is None or rule == WINDOW:
            tally.window(f"tool {kind!r}")
            return
        inner = field(tool, "function") or field(tool, "custom") or tool
        tally.text(field(inner, "name"))
        tally.text(field(inner, "description"))
        tally.json(field(inner, "parameters"))
        tally.json(field(inner, "format"))
        # Anything more a tool carries (a namespace's own tools, say) reaches the model too.
        known = {"type", "name", "description", "parameters", "format", "strict"}
        rest = {key: value for key, value in inner.items() if key not in known}
        if rest:
            tally.json(rest)

    def item(self, item: Any) -> None:
        tally = self.tally
        kind = field(item, "type")
        if isinstance(item, str):
            tally.text(item)  # a bare string input
            return
        if kind is None and isinstance(item, dict) and "role" in item:
            kind = "message"
        rule = ITEM_TYPES.get(kind) if isinstance(kind, str) else None
        if rule is None or rule == WINDOW:
            tally.window(f"input item {kind!r}")
        elif kind == "message":
            tally.add(MESSAGE_TOKENS)
            self.content(item.get("content"))
        elif kind in {"function_call", "custom_tool_call"}:
            tally.text(item.get("name"))
            tally.text(item.get("arguments") if kind == "function_call" else item.get("input"))
        elif kind in {"function_call_output", "custom_tool_call_output"}:
            self.content(item.get("output"))
        elif kind == "reasoning":
            for part in items(item.get("summary")):
                tally.text(field(part, "text"))
            tally.text(item.get("encrypted_content"))
        elif kind == "computer_call_output":
            output = item.get("output")
            if field(output, "type") == "computer_screenshot":
                self.image(output)
            else:
                tally.json(output)
        else:
            tally.json(item)


def tally_chat_request(tally: Tally, body: dict[str, Any], model: str = "") -> None:
    """Count a Chat Completions request's fields, messages, tools and schema into ``tally``."""
    tally.fields(body, CHAT_FIELDS, "request")
    tally.add(REQUEST_TOKENS)
    walker = _Walker(tally, model)
    for message in items(body.get("messages")):
        tally.add(MESSAGE_TOKENS)
        if not isinstance(message, dict):
            tally.json(message)
            continue
        walker.content(message.get("content"))
        tally.text(message.get("refusal"))
        tally.text(message.get("name"))
        if message.get("audio") is not None:
            tally.window("an earlier audio answer by id")
        for call in [*items(message.get("tool_calls")), message.get("function_call")]:
            function = field(call, "function") or field(call, "custom") or call
            tally.text(field(function, "name"))
            tally.text(field(function, "arguments") or field(function, "input"))
    for tool in [*items(body.get("tools")), *items(body.get("functions"))]:
        walker.tool(tool)
    tally.json(field(body.get("response_format"), "json_schema"))


def tally_responses_request(tally: Tally, body: dict[str, Any], model: str = "") -> None:
    """Count a Responses request's fields, instructions, input, tools and schema into ``tally``."""
    tally.fields(body, RESPONSES_FIELDS, "request")
    tally.add(REQUEST_TOKENS)
    walker = _Walker(tally, model)
    walker.content(body.get("instructions"))
    given = body.get("input")
    for item in given if isinstance(given, list) else [given]:
        walker.item(item)
    for tool in items(body.get("tools")):
        walker.tool(tool)
    tally.json(field(field(body.get("text"), "format"), "schema"))
