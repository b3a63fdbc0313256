"""Operator commands, on typer. Each command parses, calls one service, prints."""

import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

os.environ.setdefault("TYPER_USE_RICH", "0")  # plain help and errors; rich is slow to import

import typer

try:  # typer ≥ 0.28 vendors click as typer._click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from ledger.cli.operator.shared import State
from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_error, print_json
from ledger.errors import EXIT_USAGE, LedgerError, UsageError

app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    name="ledger",
    help=(
        "A tamper-evident, fail-closed spend guard for autonomous agents.\n\n"
        "`ledger COMMAND --help` explains each command.\n\n"
        "Example: ledger --home ./.ledger verdict 0.25 --provider openai"
    ),
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)
importlib.import_module("ledger.cli.operator.keys_commands").register(app)

HomeOption = Annotated[
    str | None,
    typer.Option("--home", help="The ledger home (default $LEDGER_HOME, else ./.ledger)."),
]


def _print_version(wanted: bool) -> None:
    if wanted:
        from ledger import __version__

        sys.stdout.write(f"ledger {__version__}\n")
        raise typer.Exit


VersionOption = Annotated[
    bool,
    typer.Option(
        "--version",
        help="Print `ledger <version>` and exit.",
        callback=_print_version,
        is_eager=True,
    ),
]


@app.callback()
def _global(home: HomeOption = None, version: VersionOption = False) -> None:
    del version  # printed by its callback
    State.home = home


importlib.import_module("ledger.cli.operator.init_command").register(app)  # first in --help


@app.command("verify-chain")
def verify_chain(
    log: Annotated[Path | None, typer.Argument(help="A chain file (default: the home's).")] = None,
    key: Annotated[
        list[str] | None,
        typer.Option("--key", help="Trust a public key PEM, as [ID=]PEM. Repeatable."),
    ] = None,
    trust_store: Annotated[
        Path | None,
        typer.Option("--trust-store", help="Trust the keys of this trust.json file."),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Hold the chain against this signed checkpoint file."),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Every entry must be signed.")] = False,
    allow_markers: Annotated[
        bool,
        typer.Option(
            "--allow-markers", help="Skip unauthenticated '[' marker lines instead of failing."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: ok, entries, line, reason.")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Read every entry again, not only those after the newest verified checkpoint.",
        ),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            metavar="N",
            help="Processes that verify a long chain side by side (default: the core count).",
        ),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            metavar="DIR",
            help="Read segments `ledger archive` moved out of the home from DIR too.",
        ),
    ] = None,
) -> None:
    """Verify every entry's JSON, link and signature; print OK or the first BROKEN line.

    The home's chain is verified from its newest checkpoint's verified mark
    (the entries after it) unless --full is given; a LOG is always read whole.
    Archived segments are held to their signed checkpoints unless --archive
    gives the folder they were moved to.
    Exit 0 verified (a home with no entries yet: OK 0 entries); 1 broken; 2 no
    such LOG file; 65 an unreadable key, trust store or checkpoint file.

    Example: ledger --home ./.ledger verify-chain --json

    Example: ledger verify-chain events.jsonl --key writer.pub.pem --strict

    Example: ledger --home ./.ledger verify-chain --full --jobs 4

    Example: ledger --home ./.ledger verify-chain --full --archive /mnt/cold/ledger-archive
    """
    from ledger.cli.operator.verify_command import run_verify

    _exit(
        guarded(
            lambda: run_verify(
                State.home,
                log,
                key or [],
                trust_store,
                checkpoint,
                strict=strict,
                allow_markers=allow_markers,
                as_json=as_json,
                full=full,
                jobs=jobs,
                archive=archive,
            )
        )
    )


@app.command()
def checkpoint() -> None:
    """Write a signed checkpoint of the verified chain's head.

    Example: ledger --home ./.ledger checkpoint
    """

    def body() -> int:
        from ledger.services.chain.verify import write_checkpoint

        result = write_checkpoint(_runtime())
        print_json({"path": result.path, "entries": result.entries, "head_hash": result.head_hash})
        return 0

    _exit(guarded(body))


def _register_fast_commands() -> None:
    """List the per-call commands in ``--help``; ``ledger.cli.main`` routes them."""
    from ledger.cli.arguments import FAST_COMMANDS

    helps = {
        "verdict": "Pre-call gate: allow, warn-90, halt-100 or halt-uncertainty.",
        "record": "Post-call accounting of actual spend.",
        "usage": "Read-only view of today's spend.",
        "hook": "Claude Code hooks (tool use, stop, prompt submit) and their install.",
        "tokens": "Convoy token budgets.",
        "turns": "Workflow turn budgets.",
        "tools": "Per-agent tool-call budgets.",
        "time": "Wall-clock countdown budgets.",
    }
    for name in sorted(FAST_COMMANDS):

        def forward(ctx: typer.Context, _name: str = name) -> None:
            from ledger.cli.percall.parser import run as run_fast

            _exit(run_fast(State.home, [_name, *ctx.args]))

        app.command(
            name,
            help=helps[name],
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False,
        )(forward)


_register_fast_commands()

# Operator commands that live in their own modules; each exposes register(app).
for _module in (
    "ledger.cli.operator.ops_commands",
    "ledger.cli.operator.budgets_command",
    "ledger.cli.operator.gateway_keys_command",
    "ledger.cli.operator.deploy_command",
    "ledger.cli.operator.poll_command",
    "ledger.cli.operator.serve_command",
    "ledger.cli.operator.proxy_command",
    "ledger.cli.operator.console_command",
    "ledger.cli.operator.statusline_command",
    "ledger.cli.operator.prices_command",
    "ledger.cli.operator.proof_commands",
    "ledger.cli.operator.explain_command",
    "ledger.cli.operator.metrics_command",
    "ledger.cli.operator.report_command",
    "ledger.cli.operator.export_command",
    "ledger.cli.operator.snapshot_commands",
    "ledger.cli.operator.archive_command",
    "ledger.cli.operator.status_command",
    "ledger.cli.operator.store_commands",
    "ledger.cli.operator.config_commands",
    "ledger.cli.operator.migrate_command",
):
    importlib.import_module(_module).register(app)


# click ≥ 8.2 reports a group called without a command as this usage error.
_NO_ARGS_IS_HELP: Any = getattr(click_exceptions, "NoArgsIsHelpError", ())


def command_tree() -> Any:
    """The click command of the app, its help in the one style of every command."""
    from ledger.cli.operator.help_style import uniform_metavars

    return uniform_metavars(typer.main.get_command(app))


def run(args: list[str]) -> int:
    """Run the typer app on ``args``; usage errors end in one ``ledger:`` line (exit 2)."""
    command = command_tree()
    try:
        result = command.main(args=args, prog_name="ledger", standalone_mode=False)
    except _NO_ARGS_IS_HELP as exc:
        # `ledger` or `ledger keys` alone names no command: a bad command line
        # (exit 2, stdout empty), with the help as the usage lines before the error.
        where = exc.ctx.command_path if exc.ctx is not None else "ledger"
        if exc.ctx is not None:
            sys.stderr.write(exc.ctx.get_help() + "\n")
        print_error(f"missing command; see `{where} --help`")
        return 2
    except click_exceptions.UsageError as exc:
        # One line, as every other error: what was wrong and where help is.
        message, _, suggestions = exc.format_message().rstrip(".").partition(". Did you mean ")
        if suggestions:
            message += f" (did you mean {suggestions})"
        prog = exc.ctx.command_path if exc.ctx is not None else "ledger"
        print_error(f"{message[:1].lower()}{message[1:]}; see `{prog} --help`")
        return EXIT_USAGE
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        print_error("aborted")
        return 1
    except LedgerError as exc:
        print_error(str(exc))
        return exc.exit_code
    return int(result) if isinstance(result, int) else 0


__all__ = ["UsageError", "app", "run"]
