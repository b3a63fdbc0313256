"""``python -m ledger`` runs the command line."""

import os

if "LEDGER_PARENT_PID" in os.environ:
    # A child of `ledger daemon`: it ends when the daemon does, kill -9 included.
    from ledger.edges.processes import die_with_parent

    die_with_parent(os.environ)

from ledger.cli import main

main()
