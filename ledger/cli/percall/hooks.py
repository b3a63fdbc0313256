"""``ledger hook``: the Claude Code hook adapters and ``ledger hook install``.

``ledger hook pre-tool-use`` runs before every tool use of an agent: imports
stay inside the functions, so it pays only for what it touches.
"""

import argparse
import sys
from typing import Any

from ledger.cli.output import print_error, print_json
from ledger.cli.percall.agents import home_runtime

WORKFLOW_VARIABLE = "LEDGER_WORKFLOW"
AGENT_VARIABLE = "LEDGER_AGENT"
# Set by `hook install` in the settings' env beside ANTHROPIC_BASE_URL.
GATEWAY_VARIABLE = "LEDGER_GATEWAY_URL"


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


def _hook(home: str | None, event: str) -> int:
    from ledger.core.hook_protocol import HookInputError, parse_hook_input

    try:
        hook = parse_hook_input(_read_stdin(), event)
    except HookInputError as exc:
        print_error(f"hook {event}: malformed input ({exc}); no decision")
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


def hook_session_end(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook session-end``: Claude Code SessionEnd JSON on stdin."""
    del args
    return _hook(home, "SessionEnd")


def hook_user_prompt_submit(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook user-prompt-submit``: Claude Code UserPromptSubmit JSON on stdin."""
    del args
    return _hook(home, "UserPromptSubmit")


def _launcher() -> list[str]:
    """The argv that runs this ``ledger``: its launcher's absolute path, or ``python -m ledger``."""
    import os
    from pathlib import Path

    script = sys.argv[0] if sys.argv else ""
    if not script or Path(script).name == "__main__.py":
        return [sys.executable, "-m", "ledger"]
    return [os.path.abspath(script)]  # noqa: PTH100 - absolute, not resolved: keep the venv's link


def _gateway_url(runtime: Any, given: str | None) -> str | None:
    """The gateway Claude Code is routed through: ``--gateway``, else ``proxy.listen``'s URL.

    Raises:
        UsageError: ``--gateway`` is not an http(s) URL.
        ConfigError: ``proxy.listen`` is malformed, or its port is 0 (no fixed URL).
    """
    from ledger.core.proxy_config import parse_listen
    from ledger.errors import ConfigError, UsageError

    if given is not None:
        if not given.startswith(("http://", "https://")) or given.strip() != given:
            raise UsageError(f"--gateway must be an http:// or https:// URL, got {given!r}")
        return given.rstrip("/")
    listen = runtime.config.proxy.listen
    if listen is None:
        return None
    address = parse_listen(listen, "proxy.listen")
    if address.port == 0:
        raise ConfigError(
            "proxy.listen has port 0 (any free port), so Claude Code cannot be pointed at it; "
            "give the gateway's URL with --gateway URL"
        )
    # A gateway listening on every interface is reached on this machine by loopback.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(address.host, address.host)  # noqa: S104
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{address.port}"


def _cloud_env(runtime: Any, args: argparse.Namespace, gateway: str | None) -> dict[str, str]:
    """The ``env`` of ``--bedrock`` or ``--vertex`` (none for neither).

    Raises:
        UsageError: a cloud mode without a gateway, both modes, ``--vertex``
            without ``--project`` and ``--region``, or ``--settings`` with a
            project directory.
    """
    from ledger.core.cloud_settings import bedrock_env, vertex_env
    from ledger.errors import UsageError

    if not args.vertex and args.project is not None and args.settings is not None:
        raise UsageError("give --settings or --project DIR, not both")
    if not (args.bedrock or args.vertex):
        if args.region is not None:
            raise UsageError("--region goes with --bedrock or --vertex")
        return {}
    if args.bedrock and args.vertex:
        raise UsageError("give --bedrock or --vertex, not both")
    if gateway is None:
        raise UsageError(
            "--bedrock and --vertex route Claude Code through a gateway: give --gateway"
        )
    if args.bedrock:
        region = args.region or runtime.config.proxy.bedrock_region or "us-east-1"
        return bedrock_env(gateway, region)
    if args.project is None or args.region is None:
        raise UsageError("--vertex needs --project (the Google Cloud project) and --region")
    return vertex_env(gateway, args.project, args.region)


def hook_install(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook install``: write the hooks (and the gateway) into Claude Code's settings."""
    import os
    from pathlib import Path

    from ledger.edges.settingsfile import SettingsFile, project_of, session_files, user_settings
    from ledger.errors import ConfigError
    from ledger.services.agents.hook_install import install_hooks

    runtime = home_runtime(home)
    problem = runtime.home_problem()
    if problem is not None:
        raise ConfigError(problem)
    gateway = _gateway_url(runtime, args.gateway)
    cloud_env = _cloud_env(runtime, args, gateway)
    if args.project is not None and not args.vertex:
        settings = Path(args.project) / ".claude" / "settings.json"
    elif args.settings is not None:
        settings = Path(args.settings)
    else:
        settings = user_settings(os.environ)
    settings = settings.absolute()
    session = session_files(project_of(settings, os.environ), os.environ)
    if all(path != settings for _, path in session):
        # A file Claude Code would not find by itself (given with --settings): the
        # managed settings still take precedence over it.
        session = [*[(s, p) for s, p in session if s == "managed"], ("settings", settings)]
    written = install_hooks(
        SettingsFile(), settings, _launcher(), runtime.home.resolve(),
        gateway, session, force=args.force, cloud_env=cloud_env,
    )  # fmt: skip
    if written["replaced_base_url"] is not None:
        sys.stderr.write(
            f"ledger: replaced env.ANTHROPIC_BASE_URL {written['replaced_base_url']} "
            f"with {written['gateway']} in {settings} (--force)\n"
        )
    print_json(written)
    return 0


def hook_status(home: str | None, args: argparse.Namespace) -> int:
    """``ledger hook status [DIR]``: is a Claude Code session in DIR gated; which file says so."""
    import os
    from pathlib import Path

    from ledger.edges.settingsfile import SettingsFile, session_files
    from ledger.errors import LedgerError
    from ledger.services.agents.hook_install import hook_status as status_of

    runtime = home_runtime(home)
    home_gateway = None
    if runtime.home_problem() is None:
        try:
            home_gateway = _gateway_url(runtime, None)
        except LedgerError:
            home_gateway = None  # no fixed gateway URL: only the settings can name one
    directory = Path(args.directory or ".").absolute()
    status = status_of(
        SettingsFile(), session_files(directory, os.environ), home_gateway,
        os.environ.get("ANTHROPIC_BASE_URL"),
    )  # fmt: skip
    print_json({"directory": str(directory), **status})
    return 0 if status["gated"] else 1


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
            "stays a link. Prints what it wrote (JSON).\n"
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
            "  ledger --home ~/.ledger hook install --gateway URL --vertex --project P --region R"
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
