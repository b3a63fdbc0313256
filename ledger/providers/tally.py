"""The running count behind a request's estimate, shared by each provider's walker.

A walker (one per provider module) feeds the text, base64 payloads and
images of a request body into a ``Tally``; its ``input_tokens`` is the UTF-8
size of that text ÷ 3, rounded up, plus 1,600 tokens for each image. The
whole rule is told in ``ledger.providers.estimate``.
"""

import json
from typing import Any

IMAGE_TOKENS = 1600
BYTES_PER_TOKEN = 3


class Tally:
    """Bytes of text (and base64 documents) and images seen so far."""

    def __init__(self) -> None:
        self.text_bytes = 0
        self.images = 0
        self.unseen = 0  # inputs given by reference: a URL or a file id

    def text(self, value: Any) -> None:
        """A string counts as its UTF-8 bytes; anything else as its JSON text."""
        if isinstance(value, str):
            self.text_bytes += len(value.encode("utf-8"))
        elif value is not None:
            self.json(value)

    def json(self, value: Any) -> None:
        """A value counts as its compact JSON text."""
        if value is not None:
            self.text_bytes += len(json_text(value).encode("utf-8"))

    def base64(self, data: Any) -> None:
        """A base64 payload (a data URL's or a bare one): its bytes count as text."""
        if isinstance(data, str):
            _, comma, payload = data.partition(",")
            self.text_bytes += len(payload if comma and data.startswith("data:") else data)
        else:
            self.json(data)

    @property
    def input_tokens(self) -> int:
        """The input estimate: text bytes ÷ 3 rounded up, plus each image's tokens."""
        return -(-self.text_bytes // BYTES_PER_TOKEN) + self.images * IMAGE_TOKENS


def json_text(value: Any) -> str:
    """Compact JSON text, as a provider would receive it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def items(value: Any) -> list[Any]:
    """``value`` if it is a list, else no items."""
    return value if isinstance(value, list) else []


def field(value: Any, name: str) -> Any:
    """``value[name]`` if ``value`` is an object, else None."""
    return value.get(name) if isinstance(value, dict) else None
