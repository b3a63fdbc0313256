"""Where the daemon's alert follower remembers how far it read and what it sent.

One JSON file in the home (``alerts-state.json``), replaced atomically, so a
restarted daemon neither repeats an alert nor skips an entry. A file that cannot
be read as JSON is set aside and the follower starts again from the top of the
chain: the keys of alerts already sent are lost with it, so at worst an alert
is sent twice, never not at all.
"""

import json
from pathlib import Path
from typing import Any

from ledger.edges.fileio import atomic_write

STATE_NAME = "alerts-state.json"


class AlertStateFile:
    """The follower's position, sent keys and pending deliveries."""

    def __init__(self, home: Path) -> None:
        self.path = home / STATE_NAME

    def load(self) -> dict[str, Any]:
        """The saved state, or an empty one."""
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            self.path.replace(self.path.with_name(STATE_NAME + ".unreadable"))
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, state: dict[str, Any]) -> None:
        """Replace the saved state durably.

        Raises:
            ChainIOError: the file could not be written.
        """
        atomic_write(self.path, json.dumps(state, sort_keys=True).encode("utf-8"), 0o600)
