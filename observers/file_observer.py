#!/usr/bin/env python3
"""File-backed UsageObserver, for tests and air-gapped use.

Usage (ledger appends the provider id)::

    file_observer.py [--file PATH] PROVIDER

The file is ``PATH``, else ``$LEDGER_OBSERVER_FILE``. It holds either

* one observer object (``{"usd_used": ..., "billing_ts": ...}``,
  ``{"_unreachable": true, ...}`` or ``{"_defer": true, ...}``), printed as is
  for every provider; or
* a mapping from provider id to such an object: the entry for PROVIDER is
  printed, else the ``aggregate`` entry, else ``_unreachable``.

A missing, unreadable or malformed file prints ``_unreachable``. Numbers are
copied digit for digit (never through ``float``); ledger itself validates the
object. Always exits 0.
"""

import json
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 1024 * 1024
SHAPE_KEYS = frozenset({"usd_used", "billing_ts", "server_ts", "_unreachable", "_defer", "_reason"})


def unreachable(reason: str) -> str:
    """The ``_unreachable`` object."""
    return json.dumps({"_unreachable": True, "_reason": reason})


def dumps(value: Any) -> str:
    """JSON text of ``value``, writing ``Decimal`` numbers exactly."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}: {dumps(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return json.dumps(value)


def parse_args(argv: list[str]) -> tuple[str | None, str]:
    """The file path (``None`` = from the environment) and the provider id."""
    path = None
    args = list(argv)
    if len(args) >= 2 and args[0] == "--file":
        path = args[1]
        args = args[2:]
    elif args and args[0].startswith("--file="):
        path = args[0].removeprefix("--file=")
        args = args[1:]
    provider = args[-1] if args else "aggregate"
    return path, provider


class UnreachableError(Exception):
    """No usable object; the message is the reason."""


def read_file(path: str) -> str:
    """The file's text, at most 1 MiB."""
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UnreachableError(f"file not found: {path}") from None
    except OSError as exc:
        raise UnreachableError(f"file unreadable: {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UnreachableError(f"file over 1 MiB: {path}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreachableError(f"file is not UTF-8: {path}") from None


def render(argv: list[str]) -> str:
    """The one JSON object to print."""
    path, provider = parse_args(argv)
    path = path or os.environ.get("LEDGER_OBSERVER_FILE")
    if not path:
        raise UnreachableError("no file: set LEDGER_OBSERVER_FILE or pass --file PATH")
    text = read_file(path)
    try:
        content = json.loads(text, parse_float=Decimal)
    except (ValueError, RecursionError):
        raise UnreachableError(f"file is not valid JSON: {path}") from None
    if not isinstance(content, dict):
        raise UnreachableError(f"file does not hold a JSON object: {path}")
    if not content or SHAPE_KEYS & set(content):
        return text.strip()  # one observer object, printed as is
    entry = content.get(provider, content.get("aggregate"))
    if not isinstance(entry, dict):
        raise UnreachableError(f"no object for {provider} (nor aggregate) in {path}")
    return dumps(entry)


def main(argv: list[str]) -> int:
    """Print one object; always exit 0."""
    try:
        out = render(argv)
    except UnreachableError as exc:
        out = unreachable(str(exc))
    except Exception as exc:
        out = unreachable(f"observer error: {type(exc).__name__}")
    sys.stdout.write(out + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
