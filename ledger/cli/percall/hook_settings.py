"""``ledger hook install`` and ``ledger hook status``: ledger's hooks in Claude Code's settings.

Imports stay inside the functions, as in the hook adapters beside them.
"""

import argparse
import sys
from typing import Any

from ledger.cli.output import print_json
from ledger.cli.percall.agents import home_runtime


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


def _laptop(args: argparse.Namespace) -> Any:
    """``--gateway URL --key-env VAR``: a machine with no home, only the gateway and a key.

    Raises:
        UsageError: no ``--gateway``, or a variable name that is not one.
    """
    import re

    from ledger.core.hook_settings import Laptop
    from ledger.errors import UsageError

    if args.gateway is None:
        raise UsageError("--key-env goes with --gateway URL (the gateway that holds the budget)")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", args.key_env):
        raise UsageError(f"--key-env: {args.key_env!r} is not an environment variable name")
    return Laptop(_gateway_url(None, args.gateway) or "", args.key_env)


def _cloud_env(runtime: Any, args: argparse.Namespace, gateway: str | None) -> dict[str, str]:
    """The ``env`` of ``--bedrock`` or ``--vertex`` (none for neither).

    ``runtime`` is the home's (``None`` on a laptop, where the Bedrock region
    is ``--region`` or ``us-east-1``).

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
        configured = runtime.config.proxy.bedrock_region if runtime is not None else None
        region = args.region or configured or "us-east-1"
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

    where: Any
    if args.key_env is not None:
        where = _laptop(args)
        # The cloud modes take the key from the helper too: Claude Code sends it as a Bearer.
        gateway, cloud_env = where.gateway, _cloud_env(None, args, where.gateway)
    else:
        runtime = home_runtime(home)
        problem = runtime.home_problem() or runtime.access_problem()
        if problem is not None:
            raise ConfigError(problem)
        gateway = _gateway_url(runtime, args.gateway)
        cloud_env = _cloud_env(runtime, args, gateway)
        where = runtime.home.resolve()
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
        SettingsFile(), settings, _launcher(), where,
        gateway, session, force=args.force, cloud_env=cloud_env,
    )  # fmt: skip
    if args.key_env is not None and not os.environ.get(args.key_env):
        sys.stderr.write(
            f"ledger: note: {args.key_env} is not set here: Claude Code is refused until it "
            "holds the gateway key (lk_...)\n"
        )
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

    # A laptop has no home: the settings alone say which gateway is expected.
    runtime = home_runtime(home, must_exist=False)
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
