"""Bar charts as SVG geometry, drawn on the server: rectangles scaled to the largest value.

The template writes the ``<rect>`` elements; no script or style is needed to show them.
"""

from collections.abc import Sequence
from typing import Any

WIDTH = 600
BAR = 18
GAP = 6
LABEL = 160


def bars(values: Sequence[tuple[str, int]], width: int = WIDTH) -> dict[str, Any]:
    """Horizontal bars for ``(label, value)`` pairs, the largest filling the width."""
    top = max((value for _, value in values), default=0) or 1
    room = width - LABEL
    rows = [
        {"label": label, "value": value, "x": LABEL, "y": i * (BAR + GAP),
         "w": max(1, round(room * value / top)) if value else 0, "h": BAR,
         "ty": i * (BAR + GAP) + BAR - 5}
        for i, (label, value) in enumerate(values)
    ]  # fmt: skip
    return {"rows": rows, "width": width, "height": max(BAR, len(rows) * (BAR + GAP))}


def columns(counts: Sequence[int], width: int = WIDTH, height: int = 80) -> dict[str, Any]:
    """Vertical columns (a histogram), the largest reaching the top."""
    top = max(counts, default=0) or 1
    step = width / max(1, len(counts))
    cols = [
        {"x": round(i * step, 1), "w": round(step - 2, 1),
         "h": round(height * n / top, 1), "y": round(height - height * n / top, 1), "n": n}
        for i, n in enumerate(counts)
    ]  # fmt: skip
    return {"cols": cols, "width": width, "height": height}
