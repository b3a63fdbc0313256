"""Which version of the ledger schema a fleet's database holds, and bringing it up to date."""

from typing import TYPE_CHECKING, Any

from ledger.edges.postgres.connection import lock_key
from ledger.errors import ChainIOError

if TYPE_CHECKING:
    import psycopg

    from ledger.edges.postgres.handle import PgHandle

SCHEMA_VERSION = 5


class StoreSchemaError(ChainIOError):
    """The store has no ledger schema, or one newer than this code knows."""


def refuse_without_schema(db: "PgHandle", conn: "psycopg.Connection[Any]") -> None:
    """Refuse a database without the schema this code needs (once per connection).

    Raises:
        StoreSchemaError: no ledger schema, or an older or newer one.
        StoreUnreachableError, LockTimeoutError, ChainIOError: the database failed.
    """
    version = stored_version(db, conn)
    if version is None:
        raise StoreSchemaError(
            f"store {db.display} has no ledger schema; run `ledger init` on one host"
        )
    refuse_newer(version, db.display)
    if version < SCHEMA_VERSION:
        # An older schema lacks the tables that keep the chain honest: no host
        # writes to it until one host's `ledger init` has upgraded it.
        raise StoreSchemaError(
            f"store {db.display} has schema version {version}, older than this "
            f"ledger needs ({SCHEMA_VERSION}); run `ledger init` on one host to upgrade it"
        )
    db.shared.checked = True


def stored_version(db: "PgHandle", conn: "psycopg.Connection[Any]") -> int | None:
    """The schema's version in the database, ``None`` when it has none."""
    try:
        row = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{db.schema}.schema_version",)
        ).fetchone()
        if not row or not row[0]:
            return None
        found = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    except Exception as exc:
        raise db.translate(exc) from exc
    return None if not found or found[0] is None else int(found[0])


def ensure_schema(db: "PgHandle") -> bool:
    """Create the schema when missing, or upgrade an older one; whether it was created.

    A second call is a no-op; a schema newer than this code knows is refused.

    Raises:
        StoreSchemaError: the schema is newer than this code knows.
        StoreUnreachableError, LockTimeoutError, ChainIOError: as ``transaction``.
    """
    from ledger.edges.postgres.schema import schema_statements

    with db.transaction(check_schema=False) as conn:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(db.schema, "init"),))
        version = stored_version(db, conn)
        if version is not None:
            refuse_newer(version, db.display)
            if version < SCHEMA_VERSION:
                for statement in schema_statements(
                    db.schema, create_schema=False, from_version=version
                ):
                    db.execute(statement)
                db.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))
            db.shared.checked = True
            return False
        exists = db.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (db.schema,))
        for statement in schema_statements(db.schema, create_schema=not exists):
            db.execute(statement)
        db.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))
    db.shared.checked = True
    return True


def refuse_newer(version: int, display: str) -> None:
    """Refuse a schema newer than this code knows.

    Raises:
        StoreSchemaError: it is newer.
    """
    if version > SCHEMA_VERSION:
        raise StoreSchemaError(
            f"store {display} has schema version {version}, newer than this ledger "
            f"knows ({SCHEMA_VERSION}); upgrade ledger on this host"
        )
