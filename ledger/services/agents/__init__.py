"""Agent budgets: convoy tokens, workflow turns, tool calls and countdowns (SPEC §6).

One module a budget (``tokens``, ``turns``, ``tools``, ``time``), and ``status``
for all of them at once, over one locked read-decide-append step
(``session``). Claude Code is served here too: its hooks (``hooks``), a
session's transcript spend (``claude_spend``), its USD gate (``session_gate``)
and installing the hooks (``hook_install``). Callers import the module they
use, so this package imports nothing.

Every check and use is sealed in the chain inside the chain lock, so check and
reserve (or check and count) are one atomic step across processes. Hard
budgets (tokens, tool calls) fail closed: an untrusted counter, an unknown
budget or an unrecordable check refuses. Advisory budgets (turns, time) follow
their seeds and fail open, saying that no budget applies.
"""


def clip(text: str | None, limit: int = 1024) -> str | None:
    """``text`` cut to at most ``limit`` characters, as a payload's diagnostic or reason."""
    return None if text is None else text[:limit]
