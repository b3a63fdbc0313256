"""``ledger deploy systemd``: the shipped units, rendered for this installation."""

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_error, print_json

deploy_app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Deployment files rendered for this installation.\n\n"
        "Example: ledger --home /var/lib/ledger deploy systemd --output ./units"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _launcher() -> str:
    """The ``ledger`` launcher of this installation, as an absolute path.

    The one beside the running interpreter (a venv's ``bin``) is preferred:
    the units must run this installation, not whichever ``ledger`` is first on
    a service's PATH.

    Raises:
        UsageError: no launcher can be found.
    """
    from ledger.errors import UsageError

    beside = Path(sys.executable).parent / "ledger"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("ledger")
    if found is None:
        raise UsageError("cannot find the ledger launcher: install the package (pip install -e .)")
    return str(Path(found).absolute())


@deploy_app.command("systemd")
def systemd(
    user: Annotated[
        bool,
        typer.Option(
            "--user",
            help="Units for your own systemd manager (systemctl --user), not the system's.",
        ),
    ] = False,
    output: Annotated[
        Path,
        typer.Option("--output", help="The folder to write the units to (made if missing)."),
    ] = Path("ledger-systemd"),
) -> None:
    """Write the systemd units with this launcher's path and the home's absolute path.

    Prints {"output", "files", "install"}: the units written and the commands
    that install them. The home must exist (ledger init).

    Example: ledger --home /var/lib/ledger deploy systemd --output ./units

    Example: ledger deploy systemd --user --output ~/.config/systemd/user
    """

    def body() -> int:
        from ledger.core.systemd_units import (
            DEFAULT_PROXY_LISTEN,
            Installation,
            render_unit,
            unreadable_launcher,
            wanted,
        )
        from ledger.edges.deployfiles import runbook_path, unit_sources
        from ledger.edges.fileio import atomic_write
        from ledger.errors import ChainIOError

        runtime = _runtime()
        home = str(runtime.home.absolute())
        runbook = runbook_path()
        launcher = _launcher()
        listen = runtime.config.proxy.listen or DEFAULT_PROXY_LISTEN
        where = Installation(
            launcher, home, None if runbook is None else str(runbook), user, listen
        )
        if not user and unreadable_launcher(launcher):
            print_error(
                f"warning: {launcher} is under a home folder: the units' User=ledger cannot "
                "run it (ProtectHome=yes); install under /opt/ledger (see "
                "docs/operations/systemd.md)"
            )
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ChainIOError(f"cannot make {output}: {exc.strerror or exc}") from exc
        written = []
        for name, text in unit_sources().items():
            if wanted(name, user):
                atomic_write(output / name, render_unit(text, where, name).encode())
                written.append(str(output / name))
        print_json({"output": str(output), "files": written, "install": _install(output, user)})
        return 0

    _exit(guarded(body))


def _user_unit_dir() -> Path:
    """Where a user's systemd manager looks for units it was given (``systemctl --user``)."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user"


def _install(output: Path, user: bool) -> list[str]:
    """The commands that install and start the daemon from ``output``."""
    if user:
        target = _user_unit_dir()
        steps = [] if _same_folder(output, target) else [
            f"mkdir -p {target}",
            f"cp {output}/*.service {output}/*.timer {target}/",
        ]  # fmt: skip
        return [
            *steps,
            "systemctl --user daemon-reload",
            "systemctl --user enable --now ledger-daemon.service",
            'loginctl enable-linger "$USER"',
        ]
    return [
        f"cp {output}/*.service {output}/*.timer /etc/systemd/system/",
        "systemctl daemon-reload",
        "systemctl enable --now ledger-daemon.service",
    ]


def _same_folder(one: Path, other: Path) -> bool:
    """Whether two paths name the same folder (the units are then already in place)."""
    try:
        return one.resolve() == other.resolve()
    except OSError:
        return False


def register(app: Any) -> None:
    """Add ``deploy`` to the typer app."""
    app.add_typer(deploy_app, name="deploy")
