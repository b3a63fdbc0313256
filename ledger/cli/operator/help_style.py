"""The operator commands' help in the style the per-call commands print theirs.

typer names an option's value by its Python type (``--agent <str>``); the
per-call commands, on argparse, name it by what it is (``--agent A``,
``--gateway URL``). An option without a metavar of its own is shown by its
name in capitals (``--agent AGENT``), and an argument by its name alone
(``NAME``, not ``name <str>``), so every ``--help`` reads alike.
"""

from typing import Any


def uniform_metavars(command: Any) -> Any:
    """``command`` (a click command or group) and every command below it, in the one style.

    Each value-taking option without a metavar is named by its name in
    capitals, each argument by its name alone; returns ``command``.
    """
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") == "argument" and param.name:
            # typer lists an argument as ``name <str>``; argparse as ``NAME``.
            label = param.metavar or param.name.upper()
            param.display_type_rich = lambda ctx: ""  # noqa: ARG005 - typer's signature
            param._rich_display_name = lambda label=label: label  # noqa: SLF001
            continue
        if getattr(param, "param_type_name", "") != "option":
            continue
        if param.metavar is None and not getattr(param, "is_flag", False) and param.name:
            param.metavar = param.name.upper()
    for sub in getattr(command, "commands", {}).values():
        uniform_metavars(sub)
    return command
