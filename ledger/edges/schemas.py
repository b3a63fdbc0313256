"""The JSON Schemas shipped with the package, one per event type."""

import json
from functools import cache
from pathlib import Path
from typing import Any

from ledger.errors import SchemaValidationError


@cache
def schema_dir() -> Path:
    """Where the schemas are: inside the installed package, or the source tree's ``schemas/``."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "schemas", package.parent / "schemas"):
        if candidate.is_dir():
            return candidate
    raise SchemaValidationError("JSON Schemas not found; reinstall ledger")


@cache
def load_schema(event_type: str) -> dict[str, Any]:
    """The schema for ``event_type``.

    Raises:
        SchemaValidationError: no schema exists for this event type.
    """
    path = schema_dir() / f"{event_type}.schema.json"
    try:
        schema: dict[str, Any] = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise SchemaValidationError(f"no schema for event type {event_type}") from exc
    return schema
