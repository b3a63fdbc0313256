"""The running count behind a request's estimate, shared by each provider's walker.

A walker (one per provider module) feeds what a request sends into a
``Tally``: text (its UTF-8 bytes ÷ 3, rounded up), fixed token counts (an
image by its provider's formula, a PDF by its pages, the provider's framing),
and the parts it cannot size from the body, each of which makes the input
the model's whole context window (``window``). Each provider module names
every field it knows with one of the ``rules`` below; the whole rule is told
in ``ledger.providers.estimate``.
"""

import json
from collections.abc import Mapping
from typing import Any, Final

BYTES_PER_TOKEN = 3
# Kept for callers that priced an image at a flat figure before the formulas.
IMAGE_TOKENS = 1600

# How a known field counts. Every field, part type, tool type and beta a
# provider module lists maps to one of these; anything unlisted is WINDOW.
TEXT: Final = "its text"  # UTF-8 bytes ÷ 3 (JSON text for a non-string)
WALKED: Final = "walked"  # read part by part by the provider's own walker
SETTING: Final = "a setting"  # changes no input (sampling, ids, flags)
OUTPUT: Final = "output limit"  # the output estimate
WINDOW: Final = "context window"  # input the body does not hold: the whole window
RULES: Final = frozenset({TEXT, WALKED, SETTING, OUTPUT, WINDOW})


class Tally:
    """Bytes of text, fixed token counts, and parts that count as the context window."""

    def __init__(self) -> None:
        self.text_bytes = 0
        self.tokens = 0  # images, pages and framing, by the provider's own rules
        self.images = 0
        self.unseen = 0  # parts that count as the context window
        self.reasons: list[str] = []

    def text(self, value: Any) -> None:
        """A string counts as its UTF-8 bytes; anything else as its JSON text."""
        if isinstance(value, str):
            self.text_bytes += utf8_size(value)
        elif value is not None:
            self.json(value)

    def json(self, value: Any) -> None:
        """A value counts as its compact JSON text."""
        if value is not None:
            self.text_bytes += utf8_size(json_text(value))

    def base64(self, data: Any) -> None:
        """A base64 payload (a data URL's or a bare one): its bytes count as text."""
        if isinstance(data, str):
            self.text_bytes += len(base64_payload(data))
        else:
            self.json(data)

    def image(self, tokens: int) -> None:
        """An image the provider bills ``tokens`` for."""
        self.images += 1
        self.tokens += tokens

    def add(self, tokens: int) -> None:
        """Tokens the provider adds by a fixed rule (framing, a document's pages)."""
        self.tokens += tokens

    def window(self, reason: str) -> None:
        """A part whose size the body does not show: the input is the whole context window."""
        self.unseen += 1
        self.reasons.append(reason)

    def fields(self, document: Any, known: Mapping[str, str], where: str) -> None:
        """Count an object's fields by their rules; WALKED ones are the caller's to read.

        A field ``known`` does not list counts as the context window, as does
        one listed as WINDOW; TEXT fields count as their text.
        """
        if not isinstance(document, dict):
            self.json(document)
            return
        for name, value in document.items():
            rule = known.get(name, WINDOW)
            if value is None or rule in {SETTING, OUTPUT, WALKED}:
                continue
            if rule == TEXT:
                self.text(value)
            else:
                self.window(f"{where}.{name}")

    @property
    def input_tokens(self) -> int:
        """The input estimate: text bytes ÷ 3 rounded up, plus the fixed token counts."""
        return -(-self.text_bytes // BYTES_PER_TOKEN) + self.tokens


def utf8_size(text: str) -> int:
    """The UTF-8 size of ``text``; a lone surrogate counts as the 3 bytes it would take."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return len(text.encode("utf-8", "surrogatepass"))


def json_text(value: Any) -> str:
    """Compact JSON text, as a provider would receive it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def base64_payload(data: str) -> str:
    """The base64 of a data URL (after its comma), or the string itself."""
    _, comma, payload = data.partition(",")
    return payload if comma and data.startswith("data:") else data


def items(value: Any) -> list[Any]:
    """``value`` if it is a list, else no items."""
    return value if isinstance(value, list) else []


def field(value: Any, name: str) -> Any:
    """``value[name]`` if ``value`` is an object, else None."""
    return value.get(name) if isinstance(value, dict) else None
