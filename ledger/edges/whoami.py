"""The OS user and host a change is made by (sealed in ``config.changed``)."""

import getpass
import os
import socket


def operator_identity() -> tuple[str, str]:
    """The OS user running this process and this machine's host name."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        # No passwd entry for this uid (a container's arbitrary user): its number.
        user = f"uid {os.getuid()}"
    return user or f"uid {os.getuid()}", socket.gethostname() or "unknown host"
