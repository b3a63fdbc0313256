"""Per-call agent-budget commands: ``tokens``, ``turns``, ``tools``, ``time``, ``hook``.

Imports stay inside the handlers: ``ledger hook pre-tool-use`` runs before every
tool use of an agent and pays only for what it touches.
"""

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.errors import EXIT_HALT, UsageError

_REF_RE = re.compile(r"^[0-9a-f]{64}$")
WORKFLOW_VARIABLE = "LEDGER_WORKFLOW"
AGENT_VARIABLE = "LEDGER_AGENT"

_MAX_BUDGET_SECONDS = 36_500 * 86_400


def _runtime(home: str | None) -> Any:
    from ledger.runtime import build_runtime

    return build_runtime(home)


def _id(value: str, what: str) -> str:
    from ledger.core.agents.ids import check_id

    return check_id(value, what)


def _count(text: str, what: str, minimum: int = 0) -> int:
    from ledger.core.agents.ids import parse_count

    return parse_count(text, what, minimum=minimum)


# --------------------------------------------------------------------------- tokens


def tokens_create(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens create CONVOY [--convoy-max N] [--agent-max N] [--warn-pct P]``."""
    from ledger.core.agents.ids import parse_pct
    from ledger.services.agents import tokens_create as create

    convoy = _id(args.convoy, "CONVOY")
    convoy_max = _count(args.convoy_max, "--convoy-max")
    agent_max = _count(args.agent_max, "--agent-max")
    warn = parse_pct(args.warn_pct, "--warn-pct")
    print_json(create(_runtime(home), convoy, convoy_max, agent_max, warn))
    return 0


def tokens_list(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens list``."""
    from ledger.services.agents import tokens_list as listing

    del args
    print_json(listing(_runtime(home)))
    return 0


def tokens_delete(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens delete CONVOY``."""
    from ledger.services.agents import tokens_delete as delete

    print_json(delete(_runtime(home), _id(args.convoy, "CONVOY")))
    return 0


def tokens_report(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens report CONVOY``."""
    from ledger.services.agents import tokens_report as report

    print_json(report(_runtime(home), _id(args.convoy, "CONVOY")))
    return 0


def tokens_check(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens check CONVOY AGENT PROJECTED``: exit 0 allowed, 1 refused."""
    from ledger.services.agents import tokens_check as check

    convoy = _id(args.convoy, "CONVOY")
    agent = _id(args.agent, "AGENT")
    projected = _count(args.projected, "PROJECTED")
    answer = check(_runtime(home), convoy, agent, projected)
    print_json(answer.as_json(convoy, agent, projected))
    if answer.recording_error is not None:
        print_error(f"check not recorded: {answer.recording_error}")
    return 0 if answer.allowed else EXIT_HALT


def tokens_record(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tokens record CONVOY AGENT INPUT OUTPUT [--check-ref R]``."""
    from ledger.services.agents import tokens_record as record

    convoy = _id(args.convoy, "CONVOY")
    agent = _id(args.agent, "AGENT")
    tokens_in = _count(args.input, "INPUT")
    tokens_out = _count(args.output, "OUTPUT")
    if args.check_ref is not None and not _REF_RE.fullmatch(args.check_ref):
        raise UsageError("--check-ref: must be a 64-digit lowercase hex hash")
    from ledger.cli.fast_budget import idempotency_key

    key = idempotency_key(args.idempotency_key)
    result, warning = record(
        _runtime(home), convoy, agent, tokens_in, tokens_out, args.check_ref, key
    )
    if warning:
        print_error(f"warning: {warning}")
    print_json(result)
    return 0


# --------------------------------------------------------------------------- turns


def turns_create(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns create WORKFLOW --total N --phase N``."""
    from ledger.services.agents import turns_create as create

    workflow = _id(args.workflow, "WORKFLOW")
    total = _count(args.total, "--total", minimum=1)
    phase = _count(args.phase, "--phase", minimum=1)
    print_json(create(_runtime(home), workflow, total, phase))
    return 0


def turns_phase(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns phase WORKFLOW NAME [--phase N]``: a phase transition."""
    from ledger.core.agents.ids import check_phase
    from ledger.services.agents import turns_phase as phase

    workflow = _id(args.workflow, "WORKFLOW")
    name = check_phase(args.name)
    limit = None if args.phase is None else _count(args.phase, "--phase", minimum=1)
    print_json(phase(_runtime(home), workflow, name, limit))
    return 0


def turns_record(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns record WORKFLOW [--type tool_use|file_change|delegation]``."""
    from ledger.services.agents import turns_record as record

    workflow = _id(args.workflow, "WORKFLOW")
    return _advisory(workflow, lambda: record(_runtime(home), workflow, args.type))


def turns_check(home: str | None, args: argparse.Namespace) -> int:
    """``ledger turns check WORKFLOW``: advisory, exit 0 always."""
    from ledger.services.agents import turns_check as check

    workflow = _id(args.workflow, "WORKFLOW")
    return _advisory(workflow, lambda: check(_runtime(home), workflow))


def _advisory(workflow: str, action: Callable[[], dict[str, Any]]) -> int:
    """Turn budgets are advisory (seed 000): exit 0 even when nothing can be recorded.

    A bad command line is still exit 2 (raised before this); any other failure
    prints the no-budget advice with the reason, plus the one stderr line.
    """
    from ledger.core.agents.turns import no_budget
    from ledger.errors import LedgerError

    try:
        print_json(action())
    except LedgerError as exc:
        print_error(f"turn not recorded: {exc}")
        print_json({**no_budget(workflow), "check_ref": None, "diagnostic": str(exc)})
    return 0


# --------------------------------------------------------------------------- tools


def tools_create(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tools create AGENT --role R [--files N] ...``: a tool-call budget by role.

    Builder budgets come from the planner's formula (seed 001).
    """
    from ledger.core.agents.ids import decimal_text, parse_fraction
    from ledger.services.agents import tools_create as create

    agent = _id(args.agent, "AGENT")
    files = _count(args.files, "--files")
    confidence = None
    if args.framework_confidence is not None:
        value = parse_fraction(args.framework_confidence, "--framework-confidence", low=0, high=1)
        confidence = decimal_text(value)
    result = create(_runtime(home), agent, args.role, files, args.prior_failures, confidence)
    print_json(result)
    return 0


def tools_use(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tools use AGENT [--exempt]``: exit 1 when refused (budget exhausted)."""
    from ledger.services.agents import tools_use as use

    answer = use(_runtime(home), _id(args.agent, "AGENT"), args.exempt)
    print_json(answer.view)
    return 0 if answer.allowed else EXIT_HALT


def tools_check(home: str | None, args: argparse.Namespace) -> int:
    """``ledger tools check AGENT``: exit 1 when exhausted."""
    from ledger.services.agents import tools_check as check

    answer = check(_runtime(home), _id(args.agent, "AGENT"))
    print_json(answer.view)
    return 0 if answer.allowed else EXIT_HALT


# --------------------------------------------------------------------------- time


def _budget_end(environ: dict[str, str]) -> Any:
    """``LEDGER_BUDGET_END`` as a time, ``None`` when unset.

    Raises:
        ConfigError: set but not Unix seconds.
    """
    from ledger.core.agents.time import BUDGET_END_VARIABLE, parse_budget_end
    from ledger.errors import ConfigError

    text = environ.get(BUDGET_END_VARIABLE)
    if text is None or text == "":
        return None
    try:
        return parse_budget_end(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def time_start(home: str | None, args: argparse.Namespace) -> int:
    """``ledger time start --budget-seconds N`` or ``--end ISO``."""
    from ledger.core.timefmt import parse_iso8601
    from ledger.services.agents import time_start as start

    if (args.budget_seconds is None) == (args.end is None):
        raise UsageError("give exactly one of --budget-seconds N and --end ISO")
    seconds = None
    end = None
    if args.budget_seconds is not None:
        seconds = _count(args.budget_seconds, "--budget-seconds")
        if seconds > _MAX_BUDGET_SECONDS:
            raise UsageError(f"--budget-seconds: at most {_MAX_BUDGET_SECONDS} (a century)")
    else:
        try:
            end = parse_iso8601(args.end)
        except ValueError as exc:
            raise UsageError(f"--end: {exc}") from exc
    print_json(start(_runtime(home), seconds, end))
    return 0


def time_status(home: str | None, args: argparse.Namespace) -> int:
    """``ledger time status``: advisory, exit 0."""
    from ledger.services.agents import time_status as status

    del args
    runtime = _runtime(home)
    end = _budget_end(runtime.environ)
    print_json(status(runtime, end, runtime.clock.now()))
    return 0


# --------------------------------------------------------------------------- hooks


def _read_stdin() -> bytes | str:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        data: bytes = buffer.read()
        return data
    text: str = sys.stdin.read()
    return text


def _hook_scope(environ: dict[str, str]) -> Any:
    from ledger.core.agents.ids import ID_RE
    from ledger.core.agents.time import BUDGET_END_VARIABLE, parse_budget_end
    from ledger.services.agent_hooks import HookScope

    notes: list[str] = []
    workflow = environ.get(WORKFLOW_VARIABLE) or None
    if workflow is not None and not ID_RE.fullmatch(workflow):
        notes.append(
            f"ledger: {WORKFLOW_VARIABLE}={workflow!r} is not a valid name; turns not counted"
        )
        workflow = None
    agent = environ.get(AGENT_VARIABLE) or None
    invalid_agent = None
    if agent is not None and not ID_RE.fullmatch(agent):
        invalid_agent = (
            f"ledger: {AGENT_VARIABLE}={agent!r} is not a valid agent name; "
            "tool call refused (fail-closed)"
        )
        agent = None
    budget_end = None
    end_text = environ.get(BUDGET_END_VARIABLE)
    if end_text:
        try:
            budget_end = parse_budget_end(end_text)
        except ValueError as exc:
            notes.append(f"ledger: {exc}; no countdown")
    return HookScope(workflow, agent, budget_end, invalid_agent, tuple(notes))


def _hook(home: str | None, event: str) -> int:
    from ledger.core.hook_protocol import HookInputError, parse_hook_input

    try:
        hook = parse_hook_input(_read_stdin(), event)
    except HookInputError as exc:
        print_error(f"hook {event}: malformed input ({exc}); no decision")
        return 0
    runtime = _runtime(home)
    scope = _hook_scope(runtime.environ)
    if event == "PreToolUse":
        from ledger.services.agent_hooks import pre_tool_use

        result = pre_tool_use(runtime, hook, scope)
    elif event == "Stop":
        from ledger.services.agent_hooks import stop

        result = stop(runtime, hook)
    else:
        from ledger.services.agent_hooks import post_tool_use

        result = post_tool_use(runtime, hook, scope)
    for line in [*scope.notes, *result.errors]:
        print_error(line.removeprefix("ledger: "))
    print_json(result.output)
    return 0


def hook_pre_tool_use(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook pre-tool-use``: Claude Code PreToolUse JSON on stdin."""
    del args
    return _hook(home, "PreToolUse")


def hook_post_tool_use(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook post-tool-use``: Claude Code PostToolUse JSON on stdin."""
    del args
    return _hook(home, "PostToolUse")


def hook_stop(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook stop``: Claude Code Stop JSON on stdin."""
    del args
    return _hook(home, "Stop")


# --------------------------------------------------------------------------- parsers


def _build_tokens(actions: Any) -> None:
    create = actions.add_parser(
        "create",
        help="create a convoy budget",
        description=(
            "Create (or replace) the token budget of a convoy of agents: a limit for the\n"
            "whole convoy and one for each agent in it. Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens create release-7 --convoy-max 500000 --agent-max 100000",
    )
    create.add_argument(
        "convoy",
        metavar="CONVOY",
        help="the convoy's name: letters, digits and . _ : - (up to 128)",
    )
    create.add_argument(
        "--convoy-max",
        default="500000",
        metavar="N",
        help="most tokens the whole convoy may use (default 500000)",
    )
    create.add_argument(
        "--agent-max",
        default="100000",
        metavar="N",
        help="most tokens any one agent of the convoy may use (default 100000)",
    )
    create.add_argument(
        "--warn-pct",
        default="80",
        metavar="P",
        help="usage percentage from which checks answer warning_threshold (default 80)",
    )
    create.set_defaults(handler=tokens_create)
    listing = actions.add_parser(
        "list",
        help="list convoy budgets",
        description="List every convoy budget with its limits and use so far. Exit 0.",
        epilog="Example:\n  ledger tokens list",
    )
    listing.set_defaults(handler=tokens_list)
    delete = actions.add_parser(
        "delete",
        help="delete a convoy budget",
        description=(
            "Delete a convoy budget; its history stays in the chain.\nExit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens delete release-7",
    )
    delete.add_argument("convoy", metavar="CONVOY", help="the convoy whose budget to delete")
    delete.set_defaults(handler=tokens_delete)
    report = actions.add_parser(
        "report",
        help="a convoy's usage report",
        description=(
            "Report a convoy's use: totals, reservations and each agent's share.\n"
            "Writes nothing. Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens report release-7",
    )
    report.add_argument("convoy", metavar="CONVOY", help="the convoy to report on")
    report.set_defaults(handler=tokens_report)
    check = actions.add_parser(
        "check",
        help="check and reserve before a call",
        description=(
            "Before a call: check that PROJECTED more tokens keep the convoy and the agent\n"
            "within their limits (reaching a limit exactly is allowed) and reserve them.\n"
            "Prints check_ref, allowed, reason, remaining_tokens and usage_pct.\n"
            "Exit 0 allowed; 1 not allowed or not recorded; 2 bad command line."
        ),
        epilog="Example:\n  ledger tokens check release-7 builder-1 4000",
    )
    check.add_argument("convoy", metavar="CONVOY", help="the convoy the agent belongs to")
    check.add_argument(
        "agent", metavar="AGENT", help="the agent about to call (a name like CONVOY's)"
    )
    check.add_argument(
        "projected",
        metavar="PROJECTED",
        help="tokens the coming call is expected to use (a whole number, 0 or more)",
    )
    check.set_defaults(handler=tokens_check)
    record = actions.add_parser(
        "record",
        help="record actual use after a call",
        description=(
            "After a call: record the tokens it actually used and settle the reservation\n"
            "made by `ledger tokens check` (unsettled ones expire after\n"
            "usd.reservation_ttl_seconds). Exit 0; 2 bad command line."
        ),
        epilog=(
            "Example:\n"
            "  REF=$(ledger tokens check release-7 builder-1 4000 | jq -r .check_ref)\n"
            '  ledger tokens record release-7 builder-1 3100 650 --check-ref "$REF" \\\n'
            "      --idempotency-key msg-01HZX3"
        ),
    )
    record.add_argument("convoy", metavar="CONVOY", help="the convoy the agent belongs to")
    record.add_argument("agent", metavar="AGENT", help="the agent that made the call")
    record.add_argument("input", metavar="INPUT", help="input tokens the call used (0 or more)")
    record.add_argument(
        "output", metavar="OUTPUT", help="output tokens the call produced (0 or more)"
    )
    record.add_argument(
        "--check-ref",
        metavar="R",
        help="the check_ref printed by `ledger tokens check` (64 hex digits); "
        "settles that reservation",
    )
    record.add_argument(
        "--idempotency-key",
        metavar="K",
        help="repeat-safe key; a second record with the same key writes nothing and prints "
        "the first result with duplicate: true; matches ^[A-Za-z0-9._:-]{1,128}$",
    )
    record.set_defaults(handler=tokens_record)


def _build_turns(actions: Any) -> None:
    create = actions.add_parser(
        "create",
        help="create (or reset) a workflow budget",
        description=(
            "Create (or reset) a workflow's turn budget: a limit for all its turns and one\n"
            "for the current phase. Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger turns create fix-login --total 40 --phase 15",
    )
    create.add_argument(
        "workflow",
        metavar="WORKFLOW",
        help="the workflow's name: letters, digits and . _ : - (up to 128)",
    )
    create.add_argument(
        "--total", required=True, metavar="N", help="most turns in the whole workflow (1 or more)"
    )
    create.add_argument(
        "--phase", required=True, metavar="N", help="most turns in each phase (1 or more)"
    )
    create.set_defaults(handler=turns_create)
    phase = actions.add_parser(
        "phase",
        help="start a new phase",
        description=(
            "Start a new phase of a workflow: its phase turn count starts again from 0.\n"
            "Exit 0; 2 bad command line."
        ),
        epilog="Example:\n  ledger turns phase fix-login implement --phase 20",
    )
    phase.add_argument("workflow", metavar="WORKFLOW", help="the workflow entering a new phase")
    phase.add_argument(
        "name", metavar="NAME", help="the new phase's name (1 to 128 printable characters)"
    )
    phase.add_argument(
        "--phase",
        metavar="N",
        help="a new turn limit for this and later phases (default: keep the current one)",
    )
    phase.set_defaults(handler=turns_phase)
    record = actions.add_parser(
        "record",
        help="count one turn",
        description=(
            "Count one turn of a workflow and print the advisory verdict: 80% of the total\n"
            "or phase limit warns, 100% is exceeded. Advisory: exit 0 always (2 for a bad\n"
            "command line); the verdict is in the JSON."
        ),
        epilog="Example:\n  ledger turns record fix-login --type file_change",
    )
    record.add_argument("workflow", metavar="WORKFLOW", help="the workflow taking the turn")
    record.add_argument(
        "--type",
        default="tool_use",
        choices=("tool_use", "file_change", "delegation"),
        help="what kind of turn it was (default tool_use)",
    )
    record.set_defaults(handler=turns_record)
    check = actions.add_parser(
        "check",
        help="advisory check",
        description=(
            "Show a workflow's turn verdict without counting a turn. Advisory: exit 0\n"
            "always (2 for a bad command line); the verdict is in the JSON."
        ),
        epilog="Example:\n  ledger turns check fix-login",
    )
    check.add_argument("workflow", metavar="WORKFLOW", help="the workflow to check")
    check.set_defaults(handler=turns_check)


def _build_tools(actions: Any) -> None:
    create = actions.add_parser(
        "create",
        help="assign a budget by role",
        description=(
            "Give an agent a tool-call budget by role: explorer 4, observer 10, planner\n"
            "unlimited, builder min(9, 5 + (files - 1) + 2 if prior failures or framework\n"
            "confidence >= 0.6). Exit 0; 2 bad command line."
        ),
        epilog=(
            "Examples:\n"
            "  ledger tools create scout-1 --role explorer\n"
            "  ledger tools create builder-1 --role builder --files 3 --framework-confidence 0.7"
        ),
    )
    create.add_argument(
        "agent", metavar="AGENT", help="the agent's name: letters, digits and . _ : - (up to 128)"
    )
    create.add_argument(
        "--role",
        required=True,
        choices=("explorer", "planner", "builder", "observer"),
        help="the agent's role, which sets its budget",
    )
    create.add_argument(
        "--files",
        default="1",
        metavar="N",
        help="files the builder's task touches; each beyond the first adds a call (default 1)",
    )
    create.add_argument(
        "--prior-failures",
        action="store_true",
        help="the task failed before: a builder gets 2 more calls",
    )
    create.add_argument(
        "--framework-confidence",
        metavar="X",
        help="the planner's confidence in the framework, 0 to 1; "
        "0.6 or more gives a builder 2 more calls",
    )
    create.set_defaults(handler=tools_create)
    use = actions.add_parser(
        "use",
        help="use one tool call",
        description=(
            "Count one tool call of an agent, printing Budget: used/total.\n"
            "Exit 0 allowed; 1 refused (budget exhausted); 2 bad command line."
        ),
        epilog="Examples:\n  ledger tools use builder-1\n  ledger tools use builder-1 --exempt",
    )
    use.add_argument("agent", metavar="AGENT", help="the agent making the call")
    use.add_argument(
        "--exempt",
        action="store_true",
        help="an exempt action (preflight, memory, phase transition): admitted and not counted",
    )
    use.set_defaults(handler=tools_use)
    check = actions.add_parser(
        "check",
        help="check the budget",
        description=(
            "Show an agent's tool-call budget without using a call.\n"
            "Exit 0 calls left; 1 exhausted; 2 bad command line."
        ),
        epilog="Example:\n  ledger tools check builder-1",
    )
    check.add_argument("agent", metavar="AGENT", help="the agent to check")
    check.set_defaults(handler=tools_check)


def _build_time(actions: Any) -> None:
    start = actions.add_parser(
        "start",
        help="start the countdown",
        description=(
            "Start a wall-clock countdown; give exactly one of --budget-seconds and --end.\n"
            "LEDGER_BUDGET_END (Unix seconds), when set, overrides it for that process.\n"
            "Exit 0; 2 bad command line."
        ),
        epilog=(
            "Examples:\n"
            "  ledger time start --budget-seconds 3600\n"
            "  ledger time start --end 2026-06-01T18:00:00Z"
        ),
    )
    start.add_argument("--budget-seconds", metavar="N", help="seconds from now until the deadline")
    start.add_argument("--end", metavar="ISO", help="the deadline as an ISO-8601 time with a zone")
    start.set_defaults(handler=time_start)
    status = actions.add_parser(
        "status",
        help="remaining time and urgency tier",
        description=(
            "Show the time left before the deadline and its urgency tier (continue,\n"
            "wrap_up, commit_now, expired). Advisory: exit 0; 78 for a malformed\n"
            "LEDGER_BUDGET_END."
        ),
        epilog="Examples:\n  ledger time status\n  LEDGER_BUDGET_END=1780336800 ledger time status",
    )
    status.set_defaults(handler=time_status)


def _build_hook(actions: Any) -> None:
    pre = actions.add_parser(
        "pre-tool-use",
        help="PreToolUse: count and decide",
        description=(
            "Claude Code PreToolUse hook: reads the hook JSON on stdin, runs a USD verdict\n"
            "for the session (estimate: the mean cost of its recorded calls, at least $0.01),\n"
            "counts the turn (LEDGER_WORKFLOW) and the tool call (LEDGER_AGENT), and prints\n"
            "the JSON Claude Code reads: permissionDecision deny on halt-100 or\n"
            "halt-uncertainty, or when the agent's tool-call budget is exhausted; a\n"
            "systemMessage on warn-90. Without usd.daily_cap, USD gating is off (said once).\n"
            "Exit 0 (malformed stdin: one stderr line, no decision)."
        ),
        epilog=(
            "Example (in .claude/settings.json, PreToolUse hook command):\n"
            "  LEDGER_WORKFLOW=fix-login LEDGER_AGENT=builder-1 ledger hook pre-tool-use"
        ),
    )
    pre.set_defaults(handler=hook_pre_tool_use)
    post = actions.add_parser(
        "post-tool-use",
        help="PostToolUse: record spend; countdown and budget lines",
        description=(
            "Claude Code PostToolUse hook: reads the hook JSON on stdin, records the calls\n"
            "of its transcript_path not recorded yet (priced from each message's usage;\n"
            "provider anthropic, cycle_id the session id), and prints additionalContext\n"
            "with the countdown tier (LEDGER_BUDGET_END or `ledger time start`) and the\n"
            "budget lines. Lines it cannot read are skipped and named on stderr.\n"
            "Exit 0 (malformed stdin: one stderr line, no decision)."
        ),
        epilog=(
            "Example (in .claude/settings.json, PostToolUse hook command):\n"
            "  LEDGER_WORKFLOW=fix-login LEDGER_AGENT=builder-1 ledger hook post-tool-use"
        ),
    )
    post.set_defaults(handler=hook_post_tool_use)
    stop = actions.add_parser(
        "stop",
        help="Stop: record the session's spend",
        description=(
            "Claude Code Stop hook: reads the hook JSON on stdin and records every call of\n"
            "its transcript_path not recorded yet, the turn's last one included. Prints {}.\n"
            "Exit 0 (malformed stdin: one stderr line)."
        ),
        epilog=("Example (in .claude/settings.json, Stop hook command):\n  ledger hook stop"),
    )
    stop.set_defaults(handler=hook_stop)


_FAMILIES: dict[str, tuple[str, Any, str]] = {
    "tokens": ("convoy token budgets (seed 003)", _build_tokens,
               "create, list, delete, report, check, record"),
    "turns": ("workflow turn budgets (seed 000)", _build_turns, "create, phase, record, check"),
    "tools": ("per-agent tool-call budgets (seed 001)", _build_tools, "create, use, check"),
    "time": ("countdown budgets (seed 002)", _build_time, "start, status"),
    "hook": ("Claude Code hook adapters", _build_hook, "pre-tool-use, post-tool-use, stop"),
}  # fmt: skip


# Each family's parser once built: ``ledger serve`` answers every hook with the
# same one, and building it (four argparse parsers, a gettext look-up per
# label) cost each served hook ~2 ms. Parsing leaves a parser as it was.
_BUILT: dict[str, argparse.ArgumentParser] = {}


def _family_parser(name: str) -> argparse.ArgumentParser:
    from ledger.cli.fast import Parser

    parser = _BUILT.get(name)
    if parser is None:
        help_text, build, _actions = _FAMILIES[name]
        parser = Parser(prog=f"ledger {name}", description=help_text)
        build(
            parser.add_subparsers(
                dest="action", required=True, metavar="ACTION", parser_class=Parser
            )
        )
        _BUILT[name] = parser
    return parser


def _dispatch(name: str) -> Any:
    def handler(home: str | None, args: argparse.Namespace) -> int:
        namespace = _family_parser(name).parse_args(args.args)
        result: int = namespace.handler(home, namespace)
        return result

    return handler


def register(commands: Any) -> None:
    """Add the agent-budget command families.

    Each family's actions are parsed by a second parser built only when that
    family runs: the hook, called before every tool use, does not pay for
    building the 25 parsers of the other families. The ``family_parser``
    default builds it on request, so help and documentation can list every
    action.
    """
    examples = {
        "tokens": "ledger tokens check release-7 builder-1 4000",
        "turns": "ledger turns record fix-login --type tool_use",
        "tools": "ledger tools use builder-1",
        "time": "ledger time start --budget-seconds 3600",
        "hook": "ledger hook pre-tool-use < pre-tool-use.json",
    }
    for name, (help_text, _build, actions) in _FAMILIES.items():
        parser = commands.add_parser(
            name,
            help=help_text,
            description=f"{help_text[:1].upper()}{help_text[1:]}.",
            usage=f"ledger {name} ACTION ...",
            epilog=(
                f"Actions: {actions}\n"
                f"  (`ledger {name} ACTION --help` explains each)\n\n"
                f"Example:\n  {examples.get(name, f'ledger {name} ACTION --help')}"
            ),
        )
        parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(
            handler=_dispatch(name),
            family_parser=lambda name=name: _family_parser(name),
        )
