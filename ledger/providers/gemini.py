"""Gemini's wire format: a generateContent request's estimate and a response's usage.

Every request field, part kind and tool this estimate knows is listed below
in camelCase with its rule (``ledger.providers.tally``); Gemini's JSON takes
each in snake_case too (``system_instruction``, ``generation_config``,
``max_output_tokens``, ``file_data``, …), and both spellings count alike.
Anything else counts as the model's context window. A response (or each
chunk of a stream) reports ``usageMetadata``, the call's usage so far.
"""

import json
import math
import re
from typing import Any

from ledger.providers import media
from ledger.providers.reader import UsageReader
from ledger.providers.tally import OUTPUT, SETTING, TEXT, WALKED, WINDOW, Tally, items

REQUEST_FIELDS: dict[str, str] = {
    "model": SETTING,
    "contents": WALKED,
    "systemInstruction": WALKED,
    "tools": WALKED,
    "toolConfig": SETTING,
    "safetySettings": SETTING,
    "generationConfig": WALKED,
    "labels": SETTING,
    "cachedContent": WINDOW,  # input stored at the provider
    "serviceTier": SETTING,  # priced by the price table's tier rates
    "store": SETTING,
    "modelArmorConfig": WINDOW,  # a screening pass the price table does not price
    "continuationToken": WINDOW,  # continues a stored answer
    "automaticContinuation": WINDOW,
}
GENERATION_CONFIG_FIELDS: dict[str, str] = {
    "maxOutputTokens": OUTPUT,
    "candidateCount": OUTPUT,
    "temperature": SETTING,
    "topP": SETTING,
    "topK": SETTING,
    "stopSequences": SETTING,
    "responseLogprobs": SETTING,
    "logprobs": SETTING,
    "presencePenalty": SETTING,
    "frequencyPenalty": SETTING,
    "seed": SETTING,
    "responseMimeType": SETTING,
    "responseSchema": TEXT,
    "responseJsonSchema": TEXT,
    "responseModalities": SETTING,  # audio and image output within the output limit
    "mediaResolution": SETTING,  # images and pages are counted at their largest
    "speechConfig": SETTING,
    "audioTimestamp": SETTING,
    "thinkingConfig": SETTING,  # its budget is within maxOutputTokens
    "imageConfig": SETTING,
    "enableEnhancedCivicAnswers": SETTING,
    "enableAffectiveDialog": SETTING,
    "audioTranscriptionConfig": SETTING,
    "translationConfig": SETTING,
    "responseFormat": TEXT,
    "routingConfig": WINDOW,  # another model may answer
    "modelSelectionConfig": WINDOW,
    "generationOutputConfig": WINDOW,
}
# google-genai's GenerateContentConfig options its client keeps (never sent).
CLIENT_ONLY_FIELDS = frozenset(
    {"httpOptions", "shouldReturnHttpResponse", "automaticFunctionCalling"}
)
PART_FIELDS: dict[str, str] = {
    "text": TEXT,
    "inlineData": "images by tiles of 258 tokens, PDFs by pages; other media its base64 bytes",
    "functionCall": TEXT,
    "functionResponse": TEXT,
    "executableCode": TEXT,
    "codeExecutionResult": TEXT,
    "toolCall": TEXT,
    "toolResponse": TEXT,
    "thoughtSignature": TEXT,  # opaque, but the model reads it back
    "thought": SETTING,
    "videoMetadata": SETTING,
    "mediaResolution": SETTING,
    "partMetadata": SETTING,
    "audioMetadata": SETTING,
    "documentMetadata": SETTING,
    "speechMetadata": SETTING,
    "spreadsheetMetadata": SETTING,
    "audioTranscription": TEXT,
    "fileData": WINDOW,  # a file by URI: its size is the provider's to know
    "mediaProcessing": WINDOW,
}
# Each function declaration counts every field it gives as its text.
DECLARATION_FIELDS: dict[str, str] = dict.fromkeys(
    ("name", "description", "parameters", "parametersJsonSchema", "response",
     "responseJsonSchema", "behavior"),
    TEXT,
)  # fmt: skip
TOOL_FIELDS: dict[str, str] = {
    "functionDeclarations": TEXT,  # name, description and schemas, plus TOOL_TOKENS each
    # Tools the provider runs: what they bring in is unseen; searches are priced.
    "googleSearch": WINDOW,
    "googleSearchRetrieval": WINDOW,
    "enterpriseWebSearch": WINDOW,
    "googleMaps": WINDOW,
    "urlContext": WINDOW,
    "codeExecution": WINDOW,
    "retrieval": WINDOW,
    "fileSearch": WINDOW,
    "computerUse": WINDOW,
    "mcpServers": WINDOW,
    "exaAiSearch": WINDOW,
    "parallelAiSearch": WINDOW,
}
# Per-call fees (ai.google.dev/gemini-api/docs/pricing, "Grounding with Google
# Search": $35 per 1,000 grounded prompts; Google Maps $25): one use each.
GROUNDING_TOOLS = frozenset(
    {"googleSearch", "googleSearchRetrieval", "enterpriseWebSearch", "googleMaps"}
)
GROUNDING_USD_PER_1000 = 35

# Framing: Gemini publishes none; its open models' chat template marks each
# turn with <start_of_turn>role … <end_of_turn> (5 tokens), bounded here by 8
# per content and 16 per request, and each function declaration by 12.
CONTENT_TOKENS = 8
REQUEST_TOKENS = 16
TOOL_TOKENS = 12

# Images (ai.google.dev "Image understanding"): 258 tokens when both sides are
# ≤ 384 px, else 258 per tile of the crop unit (short side ÷ 1.5, 256–768 px);
# Gemini 3 models bill by media resolution, at most 1,120 per image (high).
IMAGE_TILE_TOKENS = 258
SMALL_IMAGE = 384
GEMINI_3_IMAGE_TOKENS = 1120
# PDFs: 258 tokens a page (Gemini 2), up to 1,120 at Gemini 3's high resolution.
PDF_PAGE_TOKENS = 1120

_CALL_FIELDS = frozenset({"name", "args", "response", "id"})
_UPPER = re.compile(r"_([a-z0-9])")


def camel(name: str) -> str:
    """A field name in camelCase (``max_output_tokens`` → ``maxOutputTokens``)."""
    return _UPPER.sub(lambda found: found.group(1).upper(), name)


def snake(name: str) -> str:
    """A camelCase field name in snake_case (``maxOutputTokens`` → ``max_output_tokens``)."""
    return re.sub(r"(?<!^)([A-Z])", lambda found: "_" + found.group(1).lower(), name)


def get(value: Any, name: str) -> Any:
    """``value``'s field ``name`` (camelCase) in either spelling; the camelCase one first."""
    if not isinstance(value, dict):
        return None
    found = value.get(name)
    return value.get(snake(name)) if found is None else found


def _fields(tally: Tally, document: Any, known: dict[str, str], where: str) -> None:
    if isinstance(document, dict):
        tally.fields({camel(key): value for key, value in document.items()}, known, where)
    else:
        tally.json(document)


def image_tokens(model: str, size: tuple[int, int] | None) -> int | None:
    """What ``model`` bills for an image of ``size``; None when unknown and unbounded."""
    if size is None:  # only Gemini 3 states a largest image
        return GEMINI_3_IMAGE_TOKENS if model.startswith("gemini-3") else None
    width, height = size
    if width <= SMALL_IMAGE and height <= SMALL_IMAGE:
        tiles = 1
    else:
        unit = min(768, max(256, math.floor(min(width, height) / 1.5)))
        tiles = math.ceil(width / unit) * math.ceil(height / unit)
    formula = tiles * IMAGE_TILE_TOKENS
    return max(formula, GEMINI_3_IMAGE_TOKENS) if model.startswith("gemini-3") else formula


def _parts(tally: Tally, content: Any, model: str) -> None:
    if isinstance(content, dict):
        tally.add(CONTENT_TOKENS)
        _fields(tally, content, {"parts": WALKED, "role": SETTING}, "content")
        parts = get(content, "parts")
    else:
        parts = content
    if not isinstance(parts, list):
        tally.text(parts)
        return
    for part in parts:
        _part(tally, part, model)


def _part(tally: Tally, part: Any, model: str) -> None:
    if not isinstance(part, dict):
        tally.json(part)
        return
    for raw_name, value in part.items():
        name = camel(raw_name)
        rule = PART_FIELDS.get(name, WINDOW)
        if value is None or rule == SETTING:
            continue
        if rule == WINDOW:
            tally.window(f"part {raw_name!r}")
        elif name == "inlineData":
            _inline(tally, value, model)
        elif name == "text":
            tally.text(value)
        elif name in {"functionCall", "functionResponse"}:
            tally.text(get(value, "name"))
            tally.json(get(value, "args" if name == "functionCall" else "response"))
            rest = {key: item for key, item in value.items() if camel(key) not in _CALL_FIELDS}
            if rest:
                tally.json(rest)
        else:
            tally.json(value)


def _inline(tally: Tally, blob: Any, model: str) -> None:
    mime = str(get(blob, "mimeType") or "")
    data = get(blob, "data")
    if mime.startswith("image/"):
        tokens = image_tokens(model, media.image_size(data))
        if tokens is None:
            tally.window("unreadable image")
        else:
            tally.image(tokens)
    elif mime == "application/pdf":
        pages = media.pdf_pages(data)
        if pages is None:
            tally.window("unreadable PDF")
        else:
            tally.add(pages * PDF_PAGE_TOKENS)
    else:  # audio, video or text sent inline: its base64 bytes
        tally.base64(data)


def _tools(tally: Tally, tools: Any) -> None:
    for tool in items(tools):
        if not isinstance(tool, dict):
            tally.window("tool")
            continue
        for raw_name, value in tool.items():
            name = camel(raw_name)
            if name != "functionDeclarations":
                if TOOL_FIELDS.get(name, WINDOW) == WINDOW:
                    tally.window(f"tool {raw_name!r}")
                continue
            for declaration in items(value):
                tally.add(TOOL_TOKENS)
                if not isinstance(declaration, dict):
                    tally.json(declaration)
                    continue
                for item in declaration.values():
                    tally.text(item)


def grounding_fee_micros(body: dict[str, Any], uses: int) -> int:
    """The most the request's grounding tools may cost in fees, at ``uses`` each."""
    tools = [
        camel(name) for tool in items(get(body, "tools")) if isinstance(tool, dict) for name in tool
    ]
    grounding = sum(1 for name in tools if name in GROUNDING_TOOLS)
    return grounding * uses * GROUNDING_USD_PER_1000 * 1000


def tally_request(tally: Tally, body: dict[str, Any], model: str = "") -> None:
    """Count a generateContent request's fields, instruction, contents and tools into ``tally``."""
    _fields(tally, body, REQUEST_FIELDS, "request")
    tally.add(REQUEST_TOKENS)
    _parts(tally, get(body, "systemInstruction"), model)
    for content in items(get(body, "contents")):
        _parts(tally, content, model)
    _tools(tally, get(body, "tools"))
    _fields(tally, get(body, "generationConfig"), GENERATION_CONFIG_FIELDS, "generationConfig")


# The most of one streamed array element held while it arrives (as the SSE decoder's limit).
_ELEMENT_LIMIT = 16 * 1024 * 1024
_SPACE = b" \t\r\n"


class GeminiUsageReader(UsageReader):
    """Gemini API responses (``generateContent`` and ``streamGenerateContent``).

    A stream without ``alt=sse`` is one JSON array of responses, fed here as
    it arrives (``feed_array``): each element is read once it is whole, and
    ``array_closed`` says the array's closing bracket came.
    """

    provider = "google"

    def __init__(self) -> None:
        super().__init__()
        self._pending = b""
        self._opened = False
        self.array_closed = False

    def feed_array(self, chunk: bytes) -> None:
        """Read the next bytes of a JSON-array stream (split anywhere)."""
        if self.array_closed or self._unreadable:
            return
        self._pending += chunk
        decoder = json.JSONDecoder()
        while True:
            rest = self._pending.lstrip(_SPACE)
            if not self._opened:
                if not rest:
                    return
                if not rest.startswith(b"["):
                    self._unreadable = True
                    return
                self._opened = True
                rest = rest[1:]
            rest = rest.lstrip(_SPACE + b",")
            self._pending = rest
            if rest.startswith(b"]"):
                self.array_closed = True
                self._pending = b""
                return
            try:
                text = rest.decode("utf-8")
                element, end = decoder.raw_decode(text)
            except (ValueError, RecursionError):  # not whole yet (or never: the limit ends it)
                if len(rest) > _ELEMENT_LIMIT:
                    self._unreadable = True
                    self.content_began = True
                return
            self._pending = text[end:].encode("utf-8")
            self._element(element)

    def _element(self, element: Any) -> None:
        if not isinstance(element, dict):
            self._unreadable = self.content_began = True
            return
        if self._take_error(element):
            return
        self.content_began = True
        self._data(element)

    def feed_json(self, body: bytes) -> None:
        """Read a whole JSON body: one response, or a stream's array of them."""
        document = self._parsed(body)
        chunks = document if isinstance(document, list) else [document]
        if not chunks or not all(isinstance(chunk, dict) for chunk in chunks):
            self._unreadable = True
            return
        for chunk in chunks:
            if self._take_error(chunk):
                return
            self._data(chunk)
        self.finished = True

    def _data(self, data: dict[str, Any]) -> None:
        if isinstance(data.get("responseId"), str):
            self.response_id = data["responseId"]
        if isinstance(data.get("modelVersion"), str):
            self.model = data["modelVersion"]
        self._merge_usage(data.get("usageMetadata"))
        for candidate in data.get("candidates") or []:
            if isinstance(candidate, dict) and candidate.get("finishReason"):
                self.finished = True
