"""Gemini's wire format: a generateContent request's estimate and a response's usage.

A request's input is its ``systemInstruction``, the parts of its ``contents``
and its ``tools``' function declarations; a response (or each chunk of a
stream) reports ``usageMetadata``, the call's usage so far.
"""

from typing import Any

from ledger.providers.reader import UsageReader
from ledger.providers.tally import Tally, field, items


def _gemini_parts(tally: Tally, content: Any) -> None:
    parts = field(content, "parts") if isinstance(content, dict) else content
    if not isinstance(parts, list):
        tally.text(parts)
        return
    for part in parts:
        _gemini_part(tally, part)


def _gemini_part(tally: Tally, part: Any) -> None:
    if not isinstance(part, dict):
        tally.json(part)
        return
    for name, value in part.items():
        if name == "text":
            tally.text(value)
        elif name == "inlineData" and str(field(value, "mimeType") or "").startswith("image/"):
            tally.images += 1
        elif name == "inlineData":  # a document, audio or video sent inline: its base64 bytes
            tally.base64(field(value, "data"))
        elif name in {"functionCall", "functionResponse"}:
            tally.text(field(value, "name"))
            tally.json(field(value, "args" if name == "functionCall" else "response"))
        elif name == "fileData":  # a file by URI: its size is the provider's to know
            tally.unseen += 1
        elif name in {"thought", "thoughtSignature"}:
            continue  # a flag, and an opaque signature the model does not read as text
        else:
            tally.json({name: value})


def tally_request(tally: Tally, body: dict[str, Any]) -> None:
    """Count a generateContent request's instruction, contents and tools into ``tally``."""
    if body.get("cachedContent") is not None:
        tally.unseen += 1  # input cached at the provider: not in this body
    _gemini_parts(tally, body.get("systemInstruction"))
    for content in items(body.get("contents")):
        _gemini_parts(tally, content)
    for tool in items(body.get("tools")):
        declarations = field(tool, "functionDeclarations")
        if not isinstance(declarations, list):
            tally.json(tool)  # a built-in tool (search, code execution, …): its settings
            continue
        for declaration in declarations:
            tally.text(field(declaration, "name"))
            tally.text(field(declaration, "description"))
            tally.json(field(declaration, "parameters"))
            tally.json(field(declaration, "parametersJsonSchema"))
            tally.json(field(declaration, "response"))
    config = body.get("generationConfig")
    tally.json(field(config, "responseSchema"))
    tally.json(field(config, "responseJsonSchema"))


class GeminiUsageReader(UsageReader):
    """Gemini API responses (``generateContent`` and ``streamGenerateContent``)."""

    provider = "google"

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
