"""A throw-away PostgreSQL server for the fleet tests (SPEC §8), started by the suite itself.

``pg_server`` (session scope) runs Debian's ``initdb`` into a temporary folder
and ``pg_ctl start`` with its Unix socket in that folder and no TCP listener.
PostgreSQL refuses to run as root, so under root the server runs as the
``postgres`` system user (created when missing), which owns the folder. Tests
that need the server are skipped, with the reason printed, only when no
PostgreSQL binaries exist on the machine.

Each test gets its own schema (``pg_store_env``), so tests never see one
another's chains, and the connections a test opened in-process are closed
after it.
"""

import contextlib
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STORES = pytest.mark.parametrize("home", ["file", "postgres"], indirect=True)
"""Run a test on a home of each store: the file in the home, and a PostgreSQL schema."""

_SCHEMAS = itertools.count(1)


def pg_bin() -> Path | None:
    """The folder of ``pg_ctl``/``initdb``: on PATH, else Debian's newest version."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    return candidates[-1].parent if candidates else None


class PgServer:
    """A running test server: its socket folder, and how to stop, start and query it."""

    def __init__(self, bin_dir: Path, root: Path, user: str | None) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self.socket_dir = root
        self.user = user
        self.url = f"postgresql://postgres@/postgres?host={root}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = list(args)
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> None:
        self._run(
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip

    def start(self) -> None:
        options = f"-k {self.socket_dir} -c listen_addresses='' -c fsync=on -c max_connections=200 -c track_commit_timestamp=on"
        self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.root / "server.log"), "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop",
            check=False,
        )  # fmt: skip

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement as the superuser (autocommit); its rows."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else []

    def sql_past_the_guard(self, schema: str, statement: str) -> None:
        """Run one statement with the append-only triggers of ``schema`` disabled.

        Only the tables' owner or a superuser can do this (the suite's
        ``postgres`` is both); the trigger noting changes in ``chain_tampered``
        still fires. One transaction, so no other client sees the guard down.
        """
        import psycopg

        guards = ("chain_append_only", "checkpoints_append_only")
        tables = ("chain", "checkpoints")
        with psycopg.connect(self.url) as conn, conn.transaction():
            for table, guard in zip(tables, guards, strict=True):
                conn.execute(f'ALTER TABLE "{schema}".{table} DISABLE TRIGGER {guard}')
            conn.execute(statement)
            for table, guard in zip(tables, guards, strict=True):
                conn.execute(f'ALTER TABLE "{schema}".{table} ENABLE TRIGGER {guard}')

    def url_for(self, user: str) -> str:
        return f"postgresql://{user}@/postgres?host={self.root}"


def store_of_release(url: str, schema: str, version: int) -> None:
    """A fleet's store as an earlier release left it: its schema created up to ``version``."""
    import psycopg

    from ledger.edges.postgres.schema import schema_statements

    with psycopg.connect(url) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path = "{schema}"')
        for statement in schema_statements(schema, create_schema=False, to_version=version):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))


def copy_fleet_secret(source: Path, target: Path) -> None:
    """What an operator does before a new host's ``init``: copy the fleet's secret to it."""
    secret = source / "keys" / "fleet.secret"
    keys = target / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    keys.chmod(0o700)
    (keys / "fleet.secret").write_bytes(secret.read_bytes())
    (keys / "fleet.secret").chmod(0o600)


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
            check=True, capture_output=True,
        )  # fmt: skip
    return "postgres"


def new_server() -> PgServer:
    """A second server of one's own (to stop and start), initialised and running.

    Skips the test when there are no PostgreSQL binaries; the caller stops it.
    """
    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries (pg_ctl, initdb): install Debian's postgresql")
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
    if user is not None:
        record = pwd.getpwnam(user)
        os.chown(root, record.pw_uid, record.pw_gid)
    server = PgServer(bin_dir, root, user)
    server.init()
    server.start()
    return server


@pytest.fixture
def own_pg_server() -> Iterator[PgServer]:
    """A server for one test alone (it may be stopped mid-run); removed afterwards."""
    server = new_server()
    try:
        yield server
    finally:
        server.stop("immediate")
        from ledger.edges.postgres.connection import close_all

        close_all()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole run (skipped only without PostgreSQL binaries)."""
    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip(
            "no PostgreSQL binaries (pg_ctl, initdb) on PATH or in /usr/lib/postgresql: "
            "install Debian's postgresql package to run the fleet tests"
        )
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
    if user is not None:
        record = pwd.getpwnam(user)
        os.chown(root, record.pw_uid, record.pw_gid)
    server = PgServer(bin_dir, root, user)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_store_env(pg_server: PgServer) -> Iterator[dict[str, str]]:
    """``LEDGER_STORE_URL`` and a fresh ``LEDGER_STORE_SCHEMA`` for one test."""
    schema = f"t{os.getpid()}_{next(_SCHEMAS)}"
    yield {"LEDGER_STORE_URL": pg_server.url, "LEDGER_STORE_SCHEMA": schema}
    from ledger.edges.postgres.connection import close_all

    close_all()
    with contextlib.suppress(Exception):
        pg_server.sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
