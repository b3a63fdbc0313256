"""Claude Code hooks on a developer's laptop: no home here, the gateway's figures for the key.

``ledger hook install --gateway URL --key-env VAR`` sets up a machine that has
only the gateway's URL and a gateway key (in ``$VAR``): the gateway gates and
records every model call, so the hooks record nothing. They ask the gateway
for the key's own figures (``GET /v1/ledger/me``) and stop a session whose
tightest cap or budget is spent, so its next prompt never starts. A key
missing from the environment, a key the gateway refuses, or a gateway that
cannot be asked refuses the tool call or the prompt (fail-closed), naming the
cause and its fix.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from ledger.core.hook_protocol import (
    POST_TOOL_USE,
    PRE_TOOL_USE,
    SESSION_END,
    STOP,
    USER_PROMPT_SUBMIT,
    HookInput,
    fail_closed_output,
    post_tool_use_output,
    pre_tool_use_output,
    stopped,
    user_prompt_submit_output,
)
from ledger.core.key_figures import key_halt
from ledger.errors import GatewayKeyError, LedgerError
from ledger.services.agents.hooks import REFUSED, HookResult


class LaptopScope(NamedTuple):
    """A home-less hook call: the gateway, the variable holding the key, and the key itself."""

    gateway: str
    key_env: str
    secret: str | None
    # ``LEDGER_AGENT``: a tool-call budget, which only a home counts.
    agent: str | None = None
    notes: tuple[str, ...] = ()


def _problem(ask: Callable[[str], dict[str, Any]], scope: LaptopScope, refused: str) -> Any:
    """The key's figures, or why the hook must refuse (a ``str``)."""
    variable = f"${scope.key_env}"
    if scope.secret is None:
        return (
            f"ledger: {variable} is not set, so this session has no gateway key: export the "
            f"gateway key (lk_...) you were given as {scope.key_env} and start Claude Code "
            f"again; {refused} (fail-closed)"
        )
    if scope.agent is not None:
        return (
            "ledger: LEDGER_AGENT names a tool-call budget, which only a ledger home counts, "
            "and this machine has none (it asks the gateway): unset LEDGER_AGENT (the gateway "
            f"key names the agent); {refused} (fail-closed)"
        )
    try:
        return ask(scope.secret)
    except GatewayKeyError as exc:
        return (
            f"ledger: {exc} in {variable}: ask the gateway's operator for a valid key "
            f"(`ledger keys issue`) and export it as {scope.key_env}; {refused} (fail-closed)"
        )
    except LedgerError as exc:
        return (
            f"ledger: {exc}; {refused} (fail-closed): check that the gateway runs and that "
            f"{scope.gateway} reaches it from this machine"
        )


def laptop_answer(
    ask: Callable[[str], dict[str, Any]], hook: HookInput, scope: LaptopScope
) -> HookResult:
    """The answer to one hook call on a home-less machine; ``ask(secret)`` asks the gateway.

    Never raises a ``LedgerError``: whatever cannot be asked refuses.
    """
    event = hook.hook_event_name
    if event == SESSION_END:
        return HookResult({})  # the gateway recorded every call and holds no reservation here
    refused = REFUSED[event]
    found = _problem(ask, scope, refused)
    if isinstance(found, str):
        problem = found.removeprefix("ledger: ")
        return HookResult(fail_closed_output(event, found), errors=(problem,))
    halt = key_halt(found, refused)
    notes = list(scope.notes)
    if event == PRE_TOOL_USE:
        return HookResult(pre_tool_use_output(None, notes, halt))
    if event == USER_PROMPT_SUBMIT:
        return HookResult(user_prompt_submit_output(halt, notes))
    if event == POST_TOOL_USE:
        return HookResult(post_tool_use_output(notes, halt))
    assert event == STOP  # noqa: S101 - parse_hook_input knows these five events only
    return HookResult(stopped({}, halt))
