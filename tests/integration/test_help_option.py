"""Every command and subcommand takes ``-h`` as well as ``--help``."""

from collections.abc import Iterator
from typing import Any

import pytest
import typer

from ledger.cli.operator.app import app


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    commands = getattr(command, "commands", None)
    if isinstance(commands, dict):
        for name, sub in sorted(commands.items()):
            if not sub.hidden:
                yield from _command_paths(sub, (*path, name))


PATHS = list(_command_paths(typer.main.get_command(app)))


def test_the_tree_is_walked():
    assert ("keys", "issue") in PATHS
    assert ("deploy", "systemd") in PATHS
    assert ("verdict",) in PATHS
    assert len(PATHS) > 40


@pytest.mark.parametrize("path", PATHS, ids=lambda path: " ".join(path) or "ledger")
def test_dash_h_is_help(path: tuple[str, ...], run_inproc, tmp_path):
    short = run_inproc([*path, "-h"])
    assert short.code == 0, short.stderr
    assert "Usage" in short.stdout or "usage" in short.stdout, short.stdout
    assert short.stdout == run_inproc([*path, "--help"]).stdout
