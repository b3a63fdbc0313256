"""Agent budgets: convoy tokens, workflow turns, tool calls and countdowns (SPEC §6).

One module a budget (``tokens``, ``turns``, ``tools``, ``time``), and ``status``
for all of them at once; callers import the module they use, so this package
imports nothing.

Every check and use is sealed in the chain inside the chain lock, so check and
reserve (or check and count) are one atomic step across processes. Hard
budgets (tokens, tool calls) fail closed: an untrusted counter, an unknown
budget or an unrecordable check refuses. Advisory budgets (turns, time) follow
their seeds and fail open, saying that no budget applies.
"""


def clip(text: str | None, limit: int = 1024) -> str | None:
    """``text`` cut to at most ``limit`` characters, as a payload's diagnostic or reason."""
    return None if text is None else text[:limit]
