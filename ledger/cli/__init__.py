"""The ``ledger`` command line: a lean front door and the full typer app.

Agent hooks call ``ledger`` before every tool use, so the per-call commands
(``verdict``, ``record``, ``usage``, ``hook``, ``tokens``, ``turns``, ``tools``,
``time``) are parsed by ``argparse`` in ``ledger.cli.percall.parser`` and never import
typer. Operator commands go through the typer app in ``ledger.cli.operator.app``. Both
call the same service functions and print through ``ledger.cli.output``.
"""

import os
import sys

from ledger.cli.arguments import FAST_COMMANDS, split_global_options

# typing is not imported at run time: it costs a hook several milliseconds
# before the server is even asked (see ``ledger/__init__.py``).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def _leave_served(code: int) -> "NoReturn":
    """Exit the ``ledger`` process with a served command's code, skipping the teardown.

    The interpreter's teardown (module and object cleanup) costs a served call
    ~1.8 ms, a seventh of ``python -c pass``, and here it has nothing to do:
    the client registers no ``atexit`` handler, starts no thread and has closed
    its socket. What it would do that shows is flushing the standard streams,
    done here with the same outcome: a failed stdout flush raises as ever, a
    failed stderr flush makes the exit code 120, as ``Py_FinalizeEx`` does.
    """
    sys.stdout.flush()
    try:
        sys.stderr.flush()
    except OSError:
        code = 120
    if not 0 <= code <= 255:  # noqa: PLR2004 - out of an exit status's range: the usual way
        sys.exit(code)
    os._exit(code)


def main(argv: list[str] | None = None) -> "NoReturn":
    """Run one command and exit with its code.

    A per-call command asks ``ledger serve`` first (``ledger.cli.client``, standard
    library only) and runs in-process when no server answers.

    Args:
        argv: the arguments after ``ledger``; ``None`` (the ``ledger`` program
            itself) takes ``sys.argv`` and ends a served command without the
            interpreter's teardown, which a caller in its own process keeps.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    home, rest = split_global_options(args)
    if rest and rest[0] in FAST_COMMANDS:
        from ledger.cli.client import through_server

        answered = through_server(home, rest, args)
        if answered is not None:
            # Only a replayed reply: a command run in this process after all
            # (a lost server; ``ledger.cli.percall.parser`` runs it) may leave files,
            # threads and handlers to the usual teardown.
            if argv is None and "ledger.cli.percall.parser" not in sys.modules:
                _leave_served(answered)
            sys.stdout.flush()
            sys.exit(answered)
        from ledger.cli.percall.parser import run as run_fast

        code = run_fast(home, rest)
    else:
        from ledger.cli.operator.app import run as run_app

        code = run_app(args)
    sys.stdout.flush()
    sys.exit(code)
