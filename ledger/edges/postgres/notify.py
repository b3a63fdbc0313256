"""Notifications of new chain rows on a fleet's store: ``NOTIFY`` when sealed, ``LISTEN`` to follow.

Every append to ``<schema>.chain`` notifies the channel ``chain_channel(schema)``
in the statement that inserts the row, so a listener hears of a row when its
transaction commits, never before and without polling the table. A
``ChainListener`` holds one connection of its own (autocommit, ``LISTEN``) on
a daemon thread and calls ``wake`` for each notification, and once after each
(re)connect, since rows may have been sealed while it was not listening.
"""

import threading
from collections.abc import Callable

from ledger.edges.postgres.db import PgDatabase

_RETRY_SECONDS = 2.0


def chain_channel(schema: str) -> str:
    """The notification channel of a schema's chain (a checked identifier, at most 63 bytes)."""
    return f"ledger_chain_{schema}"[:63]


class ChainListener:
    """Calls ``wake`` whenever a row is appended to the fleet's chain."""

    def __init__(self, db: PgDatabase, wake: Callable[[], None]) -> None:
        self._url = db.url
        self._options = db.listen_options()
        self._channel = chain_channel(db.schema)
        self._wake = wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-listen", daemon=True)
        self.connected = threading.Event()

    def start(self) -> "ChainListener":
        """Start listening (on a thread of its own)."""
        self._thread.start()
        return self

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, **self._options) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    self.connected.set()
                    self._wake()  # rows sealed while nobody listened
                    while not self._stop.is_set():
                        for _note in conn.notifies(timeout=1.0, stop_after=64):
                            self._wake()
            except psycopg.Error:
                self.connected.clear()
                self._stop.wait(_RETRY_SECONDS)

    def close(self) -> None:
        """Stop listening (the thread ends within a second)."""
        self._stop.set()
