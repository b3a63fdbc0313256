"""What the group and the schema check need of a database (``PgDatabase``), as protocols.

Typed by what they use, ``group`` and ``schemacheck`` do not import ``db``,
which imports them: the package's modules import one another one way only.
"""

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ledger.errors import ChainIOError, LockTimeoutError

if TYPE_CHECKING:
    import psycopg

    from ledger.edges.postgres.connection import SharedConnection


class PgHandle(Protocol):
    """A database and schema holding a fleet's chain (``ledger.edges.postgres.db``)."""

    schema: str
    display: str

    @property
    def shared(self) -> "SharedConnection":
        """This process's connection to the database, and what its transactions hold."""
        ...

    def translate(self, exc: BaseException) -> ChainIOError | LockTimeoutError:
        """A driver error as the product's own."""
        ...

    def transaction(
        self, *, read_only: bool = False, check_schema: bool = True
    ) -> AbstractContextManager["psycopg.Connection[Any]"]:
        """One transaction (joined when one is already open in this thread)."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement; its rows."""
        ...

    def connection(self) -> "psycopg.Connection[Any]":
        """This process's connection, outside any transaction."""
        ...
