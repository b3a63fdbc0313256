"""The deployment files shipped with the package: systemd units and the runbook.

A wheel carries them as ``ledger/deploy`` (see pyproject.toml); a clone or an
editable install reads the repository's ``deploy`` folder.
"""

from pathlib import Path

from ledger.errors import ChainIOError


def deploy_dir() -> Path:
    """The folder holding ``systemd/`` and ``RUNBOOK.md``.

    Raises:
        ChainIOError: neither the package nor the repository has one (exit 74).
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "deploy", package.parent / "deploy"):
        if (candidate / "systemd").is_dir():
            return candidate
    raise ChainIOError("the systemd units are missing from this installation (deploy/systemd)")


def unit_sources() -> dict[str, str]:
    """Each shipped unit's file name and text, in name order.

    Raises:
        ChainIOError: the units cannot be found or read.
    """
    folder = deploy_dir() / "systemd"
    try:
        return {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.iterdir())}
    except OSError as exc:
        raise ChainIOError(f"cannot read {folder}: {exc.strerror or exc}") from exc


def runbook_path() -> Path | None:
    """The operator's runbook, where this installation has it."""
    path = deploy_dir() / "RUNBOOK.md"
    return path if path.is_file() else None
