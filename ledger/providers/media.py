"""What a provider bills for an image or a PDF, from the file itself.

Images are sized by their header (``imagesize``), PDFs by their page count
(``pypdf``): never by a hand-written parser. Each provider's formula from
those numbers lives in its own module; an image or PDF that cannot be read
is the caller's to count at the provider's documented maximum, or as the
context window.
"""

import base64
import binascii
import io
import logging
import math

from ledger.providers.tally import base64_payload


def decoded(data: object) -> bytes | None:
    """The bytes of a base64 payload (bare or a data URL), or None when it is not base64."""
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(base64_payload(data), validate=False)
    except (binascii.Error, ValueError):
        return None


def image_size(data: object) -> tuple[int, int] | None:
    """The width and height of a base64 image, or None when its header cannot be read."""
    raw = decoded(data)
    if not raw:
        return None
    import imagesize

    width, height = imagesize.get(io.BytesIO(raw))
    if width < 1 or height < 1:
        return None
    return width, height


def pdf_pages(data: object) -> int | None:
    """How many pages a base64 PDF has, or None when it cannot be read as a PDF."""
    raw = decoded(data)
    if not raw:
        return None
    import pypdf

    # pypdf logs what it repairs; a request's PDF is the caller's, not the log's.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        return len(pypdf.PdfReader(io.BytesIO(raw), strict=False).pages)
    except Exception:  # noqa: BLE001 - any unreadable PDF counts as the context window
        return None


def fit(width: int, height: int, long_edge: int) -> tuple[int, int]:
    """``width`` × ``height`` scaled down (never up) so its long side is at most ``long_edge``."""
    return scaled(width, height, min(1.0, long_edge / max(width, height)))


def scaled(width: int, height: int, factor: float) -> tuple[int, int]:
    """Both sides times ``factor``, rounded down, at least 1 pixel."""
    return max(1, math.floor(width * factor)), max(1, math.floor(height * factor))
