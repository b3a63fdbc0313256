"""``ledger hook``: the Claude Code hook adapters and ``ledger hook install``.

``ledger hook pre-tool-use`` runs before every tool use of an agent: imports
stay inside the functions, so it pays only for what it touches.
"""

import argparse
import sys
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.cli.percall.agents import home_runtime
from ledger.cli.percall.hook_settings import hook_install, hook_status

WORKFLOW_VARIABLE = "LEDGER_WORKFLOW"
AGENT_VARIABLE = "LEDGER_AGENT"
# Set by `hook install` in the settings' env beside ANTHROPIC_BASE_URL.
GATEWAY_VARIABLE = "LEDGER_GATEWAY_URL"
# How long a home-less hook waits for the gateway's figures (the hook's own timeout is 15 s).
ASK_SECONDS = 5.0


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
    from ledger.services.agents.hooks import HookScope

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
    gateway = environ.get(GATEWAY_VARIABLE) or None
    return HookScope(workflow, agent, budget_end, invalid_agent, tuple(notes), gateway)


def _laptop(args: argparse.Namespace, hook: Any) -> Any:
    """The answer on a machine without a home: the gateway's figures for the key in ``$VAR``."""
    import os

    from ledger.edges.gatewayme import ask_me
    from ledger.services.agents.laptop import LaptopScope, laptop_answer

    scope = _hook_scope(dict(os.environ))
    laptop = LaptopScope(
        args.gateway, args.key_env, os.environ.get(args.key_env) or None,
        agent=os.environ.get(AGENT_VARIABLE) or None, notes=scope.notes,
    )  # fmt: skip
    return laptop_answer(lambda secret: ask_me(args.gateway, secret, ASK_SECONDS), hook, laptop)


def _hook(home: str | None, event: str, args: argparse.Namespace) -> int:
    from ledger.core.hook_protocol import HookInputError, parse_hook_input

    try:
        hook = parse_hook_input(_read_stdin(), event)
    except HookInputError as exc:
        print_error(f"hook {event}: malformed input ({exc}); no decision")
        return 0
    if getattr(args, "gateway", None) is not None:
        result = _laptop(args, hook)
        for line in result.errors:
            print_error(line)
        print_json(result.output)
        return 0
    from ledger.services.agents.hooks import answer

    # A hook answers deny/block itself, even for a home that does not exist.
    runtime = home_runtime(home, must_exist=False)
    scope = _hook_scope(runtime.environ)
    result = answer(runtime, hook, scope)
    for line in [*scope.notes, *result.errors]:
        print_error(line.removeprefix("ledger: "))
    print_json(result.output)
    return 0


def hook_pre_tool_use(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook pre-tool-use``: Claude Code PreToolUse JSON on stdin."""
    return _hook(home, "PreToolUse", args)


def hook_post_tool_use(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook post-tool-use``: Claude Code PostToolUse JSON on stdin."""
    return _hook(home, "PostToolUse", args)


def hook_stop(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook stop``: Claude Code Stop JSON on stdin."""
    return _hook(home, "Stop", args)


def hook_session_end(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook session-end``: Claude Code SessionEnd JSON on stdin."""
    return _hook(home, "SessionEnd", args)


def hook_user_prompt_submit(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook user-prompt-submit``: Claude Code UserPromptSubmit JSON on stdin."""
    return _hook(home, "UserPromptSubmit", args)


def _laptop_options(parser: Any) -> None:
    """``--gateway URL --key-env VAR``: a machine without a home asks the gateway instead."""
    group = parser.add_argument_group("without a ledger home (a laptop; hook install sets these)")
    group.add_argument(
        "--gateway", metavar="URL", help="ask this gateway for the key's figures, not a home"
    )
    group.add_argument(
        "--key-env", metavar="VAR", default=None,
        help="the environment variable that holds the gateway key (lk_...)",
    )  # fmt: skip


def build(actions: Any) -> None:
    """Add the ``hook`` actions to ``actions``, the family parser's sub-parsers."""
    pre = actions.add_parser(
        "pre-tool-use",
        help="PreToolUse: count and decide",
        description=(
            "Claude Code PreToolUse hook: reads the hook JSON on stdin, runs a USD verdict\n"
            "for the session (estimate: the mean cost of its recorded calls, at least $0.01),\n"
            "counts the turn (LEDGER_WORKFLOW) and the tool call (LEDGER_AGENT), and prints\n"
            "the JSON Claude Code reads: permissionDecision deny on halt-100 or\n"
            'halt-uncertainty (with "continue": false: the session stops), or when the\n'
            "agent's tool-call budget is exhausted; a systemMessage on warn-90. Without\n"
            "usd.daily_cap, USD gating is off (said once). A home that does not exist or\n"
            "cannot be read denies (fail-closed) and creates nothing.\n"
            "Exit 0 (malformed stdin: one stderr line, no decision)."
        ),
        epilog=(
            "Example (in .claude/settings.json, PreToolUse hook command):\n"
            "  LEDGER_WORKFLOW=fix-login LEDGER_AGENT=builder-1 ledger hook pre-tool-use"
        ),
    )
    _laptop_options(pre)
    pre.set_defaults(handler=hook_pre_tool_use)
    post = actions.add_parser(
        "post-tool-use",
        help="PostToolUse: record spend; countdown and budget lines",
        description=(
            "Claude Code PostToolUse hook: reads the hook JSON on stdin, records the calls\n"
            "of its transcript_path not recorded yet (priced from each message's usage;\n"
            "provider anthropic, cycle_id the session id), and prints additionalContext\n"
            "with the countdown tier (LEDGER_BUDGET_END or `ledger time start`) and the\n"
            "budget lines. Lines it cannot read are skipped and named on stderr. Subagent\n"
            "transcripts (<session>/subagents/*.jsonl) are recorded too. Adds\n"
            '"continue": false (the session stops) once the USD budget is spent or the\n'
            "spend cannot be recorded. Exit 0 (malformed stdin: one stderr line, no decision)."
        ),
        epilog=(
            "Example (in .claude/settings.json, PostToolUse hook command):\n"
            "  LEDGER_WORKFLOW=fix-login LEDGER_AGENT=builder-1 ledger hook post-tool-use"
        ),
    )
    _laptop_options(post)
    post.set_defaults(handler=hook_post_tool_use)
    stop = actions.add_parser(
        "stop",
        help="Stop: record the session's spend",
        description=(
            "Claude Code Stop hook: reads the hook JSON on stdin and records every call of\n"
            "its transcript_path not recorded yet, the turn's last one included. Prints {},\n"
            'or {"continue": false, "stopReason": ...} when the session\'s USD budget halts\n'
            "or its spend cannot be recorded. Exit 0 (malformed stdin: one stderr line)."
        ),
        epilog=("Example (in .claude/settings.json, Stop hook command):\n  ledger hook stop"),
    )
    _laptop_options(stop)
    stop.set_defaults(handler=hook_stop)
    prompt = actions.add_parser(
        "user-prompt-submit",
        help="UserPromptSubmit: block a new prompt while the session's budget halts",
        description=(
            "Claude Code UserPromptSubmit hook: reads the hook JSON on stdin and runs the\n"
            "session's USD verdict (as pre-tool-use does). On halt-100 or halt-uncertainty it\n"
            'prints {"decision": "block", "reason": ...}: the prompt never reaches the model,\n'
            "and the reason says what lifts the halt. A systemMessage on warn-90.\n"
            "Exit 0 (malformed stdin: one stderr line, no decision)."
        ),
        epilog=(
            "Example (in .claude/settings.json, UserPromptSubmit hook command):\n"
            "  ledger --home /var/lib/ledger hook user-prompt-submit"
        ),
    )
    _laptop_options(prompt)
    prompt.set_defaults(handler=hook_user_prompt_submit)
    end = actions.add_parser(
        "session-end",
        help="SessionEnd: record the whole session and release its reservations",
        description=(
            "Claude Code SessionEnd hook: reads the hook JSON on stdin, records every call\n"
            "of its transcript_path not recorded yet (the newest included) and settles the\n"
            "session's open verdicts at $0. Prints {}. Exit 0 (malformed stdin: one stderr\n"
            "line)."
        ),
        epilog=(
            "Example (in .claude/settings.json, SessionEnd hook command):\n"
            "  ledger hook session-end"
        ),
    )
    _laptop_options(end)
    end.set_defaults(handler=hook_session_end)
    install = actions.add_parser(
        "install",
        help="write ledger's hooks (and the gateway) into Claude Code's settings.json",
        description=(
            "Writes PreToolUse, PostToolUse, Stop, UserPromptSubmit and SessionEnd hooks\n"
            "into Claude Code's settings.json (default ~/.claude/settings.json), merging with\n"
            "what is there: other hooks and settings are kept, an earlier ledger hook is\n"
            "replaced, and running it twice changes nothing. Each command names this ledger\n"
            "by its absolute path and --home with the absolute home, so neither PATH nor the\n"
            "working directory can turn the guard off. With a gateway (--gateway URL, or\n"
            "proxy.listen in ledger.toml) it also sets env.ANTHROPIC_BASE_URL, so every model\n"
            "call passes the gateway: a hard cap. It reads every settings file of the session\n"
            "(managed settings, the project's settings.local.json and settings.json, the\n"
            "user's) and refuses when one that takes precedence sets another\n"
            "env.ANTHROPIC_BASE_URL or disableAllHooks: true, or when the file itself points\n"
            "ANTHROPIC_BASE_URL elsewhere (--force replaces it). A symlinked settings file\n"
            "stays a link. On a laptop with no ledger home, --gateway URL --key-env VAR\n"
            "routes Claude Code through that gateway with the gateway key in $VAR (an\n"
            "apiKeyHelper that prints it; the secret is never written) and the hooks and the\n"
            "status line ask the gateway (/v1/ledger/me), refusing while it cannot be reached;\n"
            "with --bedrock or --vertex, Claude Code sends that key to the gateway's cloud route.\n"
            "Prints what it wrote (JSON).\n"
            "Exit 0; 2 for a --gateway that is not a URL; 78 when the home does not exist,\n"
            "proxy.listen is unusable, or the session would not be gated (the message names\n"
            "the file and key); 65 when a settings file is not JSON."
        ),
        epilog=(
            "Examples:\n"
            "  ledger --home ~/.ledger hook install\n"
            "  ledger --home ~/.ledger hook install --gateway http://127.0.0.1:8787\n"
            "  ledger --home ~/.ledger hook install --project ~/src/app\n"
            "  ledger --home ~/.ledger hook install --gateway URL --bedrock\n"
            "  ledger --home ~/.ledger hook install --gateway URL --vertex --project P --region R\n"
            "  ledger hook install --gateway https://gw.example:8787 --key-env LEDGER_KEY\n"
            "  ledger hook install --gateway https://gw.example:8787 --key-env LEDGER_KEY --bedrock"
        ),
    )
    install.add_argument(
        "--settings", metavar="PATH", help="the settings.json to write (default: the user's)"
    )
    install.add_argument(
        "--project",
        metavar="DIR",
        help="write the project's DIR/.claude/settings.json instead (with --vertex: the "
        "Google Cloud project)",
    )
    cloud = install.add_argument_group("cloud modes (with --gateway)")
    cloud.add_argument(
        "--bedrock", action="store_true", help="Claude Code on AWS Bedrock through the gateway"
    )
    cloud.add_argument(
        "--vertex", action="store_true", help="Claude Code on Google Vertex AI through the gateway"
    )
    cloud.add_argument(
        "--region", metavar="R", help="the AWS region or Vertex AI location Claude Code names"
    )
    install.add_argument(
        "--gateway",
        metavar="URL",
        help="route Claude Code through this ledger gateway (default: proxy.listen, if set)",
    )
    install.add_argument(
        "--key-env",
        metavar="VAR",
        help="a laptop without a ledger home: Claude Code presents the gateway key in $VAR "
        "(apiKeyHelper; the secret is never written) and the hooks ask --gateway",
    )
    install.add_argument(
        "--force",
        action="store_true",
        help="replace an env.ANTHROPIC_BASE_URL in the file that points elsewhere (said on stderr)",
    )
    install.set_defaults(handler=hook_install)
    status = actions.add_parser(
        "status",
        help="is a Claude Code session in DIR gated, and which settings file decides it",
        description=(
            "Reads every settings file a Claude Code session started in DIR reads (managed\n"
            "settings, DIR/.claude/settings.local.json, DIR/.claude/settings.json, the user's\n"
            "~/.claude/settings.json), highest precedence first, and prints (JSON) where its\n"
            "model calls go (gateway_url, and gateway_url_from: the file that sets it),\n"
            "whether ledger's hooks run (hooks_active, hooks_from, hooks_disabled_by), and\n"
            "gated. Exit 0 when the session is gated: ledger's hooks run and, when a gateway\n"
            "is expected (LEDGER_GATEWAY_URL in the settings, or proxy.listen), its calls go\n"
            "through it; 1 when it would be ungated; 65 when a settings file is not JSON."
        ),
        epilog=(
            "Examples:\n"
            "  ledger --home ~/.ledger hook status\n"
            "  ledger --home ~/.ledger hook status ~/src/app"
        ),
    )
    status.add_argument(
        "directory", nargs="?", metavar="DIR", help="the project directory (default: the current)"
    )
    status.set_defaults(handler=hook_status)
