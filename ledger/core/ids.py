"""Ids a caller picks (session, agent): checked once where they enter.

A session id (``--cycle-id``/``--session``, ``x-ledger-session``, an Anthropic
request's ``metadata.user_id``) or an agent name (``--agent``,
``x-ledger-agent``) is stored in the chain and shown in ``status``, reports,
alerts and metrics. It must be printable text (no control, format or
separator characters other than the space) of 1 to 128 characters; anything
else is refused where it enters (a bad command line, exit 2; HTTP 400 at the
gateway), never cleaned up silently.
"""

from ledger.errors import UsageError

MAX_ID_CHARS = 128


def checked_id(value: object, what: str) -> str | None:
    """``value`` if it is a usable id (``None`` passes: no id given).

    Raises:
        UsageError: not text, empty, longer than 128 characters, or holding a
            character that is not printable; names ``what``.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{what}: must be text")
    if not value:
        raise UsageError(f"{what}: must not be empty")
    if any("\udc80" <= char <= "\udcff" for char in value):
        # A command-line byte that is not UTF-8 reaches Python as a lone surrogate.
        raise UsageError(f"{what}: is not valid UTF-8 text")
    if len(value) > MAX_ID_CHARS:
        raise UsageError(f"{what}: longer than {MAX_ID_CHARS} characters")
    if not value.isprintable():
        bad = next(char for char in value if not char.isprintable())
        raise UsageError(f"{what}: holds a character that is not printable ({bad!r})")
    return value


def _escaped(char: str) -> str:
    return repr(char)[1:-1]  # Python's own escape of a character it cannot print: \x1b, \u2028


def printable(text: str) -> str:
    """``text`` for a terminal: each character that is not printable as its escape (``\\x1b``).

    Ids are checked where they enter, but a chain written before that check
    may hold any text; a terminal must never receive its control sequences.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def for_chat(text: str) -> str:
    """An id as a chat webhook (Slack, Teams) shows it inertly: as inline code, escaped.

    ``&``, ``<`` and ``>`` are sent as entities, so ``<!channel>`` or ``<url|text>``
    is shown, not acted on; inline code keeps a bare address from becoming a link.
    """
    inert = printable(text).replace("`", "'")
    inert = inert.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"`{inert}`"
