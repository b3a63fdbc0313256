"""The composition root: the one non-test module that names concrete edges.

Everything is built lazily, so a command pays only for what it touches.
"""

import contextlib
import os
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.core.config import Config
from ledger.edges.clock import FixedClock, SystemClock, clock_from_env
from ledger.edges.configfile import load_config
from ledger.edges.fileio import atomic_write, home_problem
from ledger.edges.files import walcheckpoints
from ledger.edges.files.chainfile import ChainFile
from ledger.edges.files.groupcommit import lock_released
from ledger.edges.files.homefiles import HomeFiles
from ledger.edges.files.keyfiles import KeyDir
from ledger.edges.files.statefile import StateFile
from ledger.edges.locks import exclusive_lock
from ledger.edges.schemas import load_schema
from ledger.errors import ConfigError, LedgerError
from ledger.homes import CONFIG_FILE, check_home, resolve_home

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger.core.checkpoint import Checkpoint
    from ledger.core.observation import Deferred, Reading, Unreachable
    from ledger.edges.files.rollupfile import RollupFile
    from ledger.edges.files.snapshotfiles import SnapshotFiles
    from ledger.edges.files.spoolfiles import SpoolDir
    from ledger.edges.gatewaykeyfile import GatewayKeyFile
    from ledger.edges.postgres.db import PgDatabase
    from ledger.edges.postgres.fleetsecret import FleetSecret
    from ledger.edges.postgres.gatewaykeys import PgGatewayKeys
    from ledger.edges.postgres.notify import ChainListener
    from ledger.edges.postgres.state import PgStateStore
    from ledger.edges.postgres.store import PgChainStore
    from ledger.edges.transcripts import TranscriptFiles
    from ledger.services.gate.spool import SpoolingChain
    from ledger.services.ports import Head
    from ledger.services.views.budget_facts_at import FactsAt

CHAIN_FILE = "events.jsonl"
SEGMENTS_DIR = "segments"


# The process environment as one dict, while a resident gate keeps a request's
# environment in place: copying ~100 variables for every runtime cost more than
# the decision. ``None``: copy ``os.environ`` (it may have changed).
_SETTLED_ENVIRON: list[dict[str, str] | None] = [None]


def settle_environ(environ: dict[str, str] | None) -> None:
    """Name the copy of ``os.environ`` runtimes share until it changes, or ``None``.

    Whoever settles it promises that ``os.environ`` equals ``environ`` until the
    next call (the resident gate, which alone switches environments between
    requests, and whose commands never write to it). Runtimes never write to
    their ``environ``.
    """
    _SETTLED_ENVIRON[0] = environ


def serving_many_calls() -> None:
    """This process answers call after call (gateway, ``serve``, the Python API).

    The derived index's WAL checkpoints then run on a thread of their own
    instead of inside a call's commit (``ledger.edges.files.walcheckpoints``).
    A one-shot command keeps SQLite's own: it has no later moment to run them in.
    """
    walcheckpoints.start()


class Runtime(HomeFiles):
    """A home and the edges that serve it."""

    def __init__(self, home: Path, environ: dict[str, str] | None = None) -> None:
        self.home = home
        if environ is None:
            environ = _SETTLED_ENVIRON[0]
            if environ is None:
                environ = dict(os.environ)
        self.environ = environ

    @cached_property
    def clock(self) -> SystemClock | FixedClock:
        """``LEDGER_NOW`` if set, else the system clock."""
        return clock_from_env(self.environ)

    @cached_property
    def host_config(self) -> Config:
        """``ledger.toml`` with environment overrides, without a fleet's pushed caps."""
        return load_config(self.config_path, self.environ)

    @cached_property
    def fleet_caps(self) -> dict[str, Any] | None:
        """The ``[usd]`` and ``[[budgets]]`` a fleet's store holds (``ledger config push``)."""
        if self.host_config.store_url is None:
            return None
        from ledger.edges.postgres.fleetconfig import pushed_caps

        return pushed_caps(self.database, self.state_dir / "fleet-caps.json")

    @cached_property
    def config(self) -> Config:
        """``ledger.toml`` with environment overrides; a fleet's caps from its store."""
        fleet = self.fleet_caps
        if fleet is None:
            return self.host_config
        from ledger.edges.configfile import load_fleet_config

        return load_fleet_config(self.config_path, fleet, self.environ)

    @property
    def caps_scope(self) -> str:
        """``"fleet"`` when the caps in force are the store's pushed ones, else ``"host"``."""
        return "fleet" if self.fleet_caps is not None else "host"

    def operator_identity(self) -> tuple[str, str]:
        """The OS user and host running this command."""
        from ledger.edges.whoami import operator_identity

        return operator_identity()

    @property
    def config_path(self) -> Path:
        """The home's config file."""
        return self.home / CONFIG_FILE

    @cached_property
    def chain(self) -> "ChainFile | SpoolingChain":
        """The chain: the home's file, or the fleet's database when ``store.url`` is set."""
        if self.host_config.store_url is not None:
            self._refuse_unmigrated_chain()
            from ledger.services.gate.recording import drain_spool
            from ledger.services.gate.spool import SpoolingChain

            return SpoolingChain(self.pg_chain, self.spool, lambda: drain_spool(self))
        from ledger.edges.files.sealing import SegmentLimits
        from ledger.edges.files.segmentfiles import SegmentDir

        config = self.host_config
        return ChainFile(
            self.home / CHAIN_FILE,
            float(config.lock_timeout_seconds),
            segments=SegmentDir(self.home / SEGMENTS_DIR),
            limits=SegmentLimits(config.segment_entries, config.segment_days or None),
        )

    def _refuse_unmigrated_chain(self) -> None:
        """A home that names a store but still has its own chain was never moved there.

        Raises:
            ConfigError: ``events.jsonl`` holds entries the store would not have.
        """
        try:
            size = (self.home / CHAIN_FILE).stat().st_size
        except OSError:
            return
        if size or any((self.home / SEGMENTS_DIR).glob("0*.json")):
            raise ConfigError(
                f"{self.home / CHAIN_FILE} holds this home's chain but ledger.toml names a "
                "store: remove [store] and run `ledger store migrate --to URL`, which moves "
                "the chain, keys and checkpoints there"
            )

    @cached_property
    def keys(self) -> KeyDir:
        """The home's keys; the trust store is the home's, or the fleet's database's."""
        if self.host_config.store_url is not None:
            self._refuse_unmigrated_chain()
            from ledger.edges.postgres.trust import PgKeyDir

            return PgKeyDir(self.home, self.database)
        return KeyDir(self.home)

    @cached_property
    def gateway_keys(self) -> "GatewayKeyFile | PgGatewayKeys":
        """The gateway keys (digests only): the home's file, or the fleet's database's table."""
        if self.host_config.store_url is not None:
            from ledger.edges.postgres.gatewaykeys import PgGatewayKeys

            return PgGatewayKeys(self.database, self.fleet_secret)
        from ledger.edges.gatewaykeyfile import GatewayKeyFile

        lock_timeout = float(self.host_config.lock_timeout_seconds)
        return GatewayKeyFile(self.home / "gateway_keys.json", lock_timeout)

    @cached_property
    def states(self) -> "StateFile | PgStateStore":
        """The derived state: a file in the home, or a row beside the fleet's chain."""
        if self.host_config.store_url is not None:
            from ledger.edges.postgres.state import PgStateStore

            return PgStateStore(self.database, self.fleet_secret)
        try:
            days = self.config.idempotency_days
        except LedgerError:
            # A command that needs no configuration still reads its state; the
            # days only decide where a key is kept, never whether it is found.
            days = Config().idempotency_days
        return StateFile(self.state_dir, self.home / "keys" / "state-mac.key", days)

    @cached_property
    def rollups(self) -> "RollupFile":
        """Spend per quarter hour and dimension (``state/rollups.sqlite3``), for reports."""
        from ledger.edges.files.rollupfile import RollupFile

        return RollupFile(
            self.state_dir / "rollups.sqlite3",
            self.home / "keys" / "state-mac.key",
            float(self.host_config.lock_timeout_seconds),
        )

    def budget_facts_at(self, head: "Head", entries: int, from_slot: int) -> "FactsAt | None":
        """What a changed budget is counted from, at a chain position (``budget_facts_at``)."""
        from ledger.services.views.budget_facts_at import facts_at

        return facts_at(self, head, entries, from_slot)

    @property
    def uses_database(self) -> bool:
        """Whether ``store.url`` puts the chain in a PostgreSQL database (SPEC §8)."""
        return self.host_config.store_url is not None

    @cached_property
    def database(self) -> "PgDatabase":
        """The fleet's database (connected on first use).

        Raises:
            ConfigError: ``store.url`` is not set.
        """
        from ledger.edges.postgres.db import PgDatabase

        host = self.host_config
        if host.store_url is None:
            raise ConfigError("store.url: not set; this home keeps its chain in events.jsonl")
        return PgDatabase(host.store_url, host.store_schema, host.lock_timeout_seconds)

    def chain_listener(self, wake: "Callable[[], None]") -> "ChainListener | None":
        """On a fleet's store, a listener calling ``wake`` for each new chain row; else ``None``.

        Not started: the caller starts and closes it. A file store has no
        notifications (its readers follow the file's tail).
        """
        if self.config.store_url is None:
            return None
        from ledger.edges.postgres.notify import ChainListener

        return ChainListener(self.database, wake)

    @cached_property
    def fleet_secret(self) -> "FleetSecret":
        """This host's copy of the secret that authenticates the fleet's derived state."""
        from ledger.edges.postgres.fleetsecret import FILE_NAME, FleetSecret

        return FleetSecret(self.home / "keys" / FILE_NAME, self.database)

    @cached_property
    def pg_chain(self) -> "PgChainStore":
        """The fleet's chain itself, without the spool in front of it."""
        from ledger.edges.postgres.store import PgChainStore, limits_of

        return PgChainStore(self.database, limits_of(self.host_config))

    @cached_property
    def spool(self) -> "SpoolDir":
        """Records waiting in the home for an unreachable store (SPEC §8)."""
        from ledger.edges.files.spoolfiles import SpoolDir

        return SpoolDir(self.home / "spool")

    def observe(self, provider: str) -> "Reading | Unreachable | Deferred":
        """Run the configured UsageObserver for ``provider`` (no observer: unreachable)."""
        from ledger.core.observation import Unreachable
        from ledger.edges.observer import run_observer

        command = self.config.observer_command
        if command is None:
            return Unreachable(provider, "no observer.command configured", self.clock.now())
        config = self.config
        # Never while holding the chain lock, even when the resident
        # gate's group commit holds it across a batch of requests.
        with lock_released(self.home / (CHAIN_FILE + ".lock")), self._fleet_lock_released():
            return run_observer(
                command, provider, config.observer_timeout_seconds, self.clock, config.observer_env
            )

    def _fleet_lock_released(self) -> AbstractContextManager[None]:
        """Outside the fleet's chain lock, even between the units of a batch's transaction."""
        if self.host_config.store_url is None:
            return contextlib.nullcontext()
        return self.database.group_released()

    def exclusive(
        self, name: str, wait_seconds: float | None = None
    ) -> AbstractContextManager[None]:
        """A named lock in the home, e.g. so two reconciles never interleave.

        It waits ``wait_seconds`` (0: not at all), by default
        ``chain.lock_timeout_seconds``.
        """
        timeout = self.host_config.lock_timeout_seconds if wait_seconds is None else wait_seconds
        return exclusive_lock(self.home / f"{name}.lock", float(timeout))

    def schema(self, event_type: str) -> dict[str, Any]:
        """The JSON Schema of an event type."""
        return load_schema(event_type)

    def write_file(self, path: Path, data: bytes) -> None:
        """Write a whole file atomically (temp, fsync, rename)."""
        atomic_write(path, data)

    def set_usd_for(self, budget: str, value: str, usd: float) -> None:
        """Give ``value`` its own cap in budget ``budget`` of ``ledger.toml`` (its ``usd_for``)."""
        from ledger.edges.configedit import set_usd_for

        set_usd_for(self.config_path, budget, value, usd, self.environ)

    def write_checkpoint(self, checkpoint: "Checkpoint") -> Path:
        """Store a checkpoint in the home (and in the fleet's database, SPEC §8)."""
        from ledger.edges.files.checkpointfiles import CheckpointDir

        if self.host_config.store_url is not None:
            from ledger.edges.postgres.checkpoints import PgCheckpoints

            PgCheckpoints(self.database).write(checkpoint)
        return CheckpointDir(self.checkpoints_dir).write(checkpoint)

    def newest_checkpoint(self) -> "Checkpoint | None":
        """The home's newest checkpoint, or the fleet's when it vouches for more entries."""
        from ledger.edges.files.checkpointfiles import CheckpointDir

        found = CheckpointDir(self.checkpoints_dir).newest()
        own = None if found is None else found[1]
        if self.host_config.store_url is None:
            return own
        from ledger.edges.postgres.checkpoints import PgCheckpoints

        shared = PgCheckpoints(self.database).newest()
        if own is None or (shared is not None and shared.entries >= own.entries):
            return shared
        return own

    def snapshot_files(self) -> "SnapshotFiles":
        """The files snapshots and recovery touch: snapshots, evidence, derived state."""
        from ledger.edges.files.snapshotfiles import SnapshotFiles

        if self.host_config.store_url is not None:
            from ledger.edges.postgres.snapshot import PgSnapshotFiles
            from ledger.edges.postgres.state import PgStateStore

            return PgSnapshotFiles(
                self.pg_chain,
                PgStateStore(self.database, self.fleet_secret),
                self.home,
                self.snapshots_dir,
                self.checkpoints_dir,
                self.state_dir,
            )
        from ledger.edges.files.segmentfiles import SegmentDir

        return SnapshotFiles(
            self.home,
            self.home / CHAIN_FILE,
            self.snapshots_dir,
            self.checkpoints_dir,
            self.state_dir,
            SegmentDir(self.home / SEGMENTS_DIR),
        )

    def has_trust_store(self) -> bool:
        """Whether ``ledger init`` has made a trust store here (or in the fleet's store)."""
        if self.host_config.store_url is not None:
            self._refuse_unmigrated_chain()
            from ledger.edges.postgres.trust import PgKeyDir

            keys = self.keys
            return isinstance(keys, PgKeyDir) and keys.trust_bytes() is not None
        return self.keys.trust_path.exists()

    @cached_property
    def transcripts(self) -> "TranscriptFiles":
        """Claude Code transcripts and how far each was read (derived state)."""
        from ledger.edges.transcripts import TranscriptFiles

        return TranscriptFiles(
            self.state_dir / "transcripts", float(self.host_config.lock_timeout_seconds)
        )

    def home_problem(self) -> str | None:
        """Why this home cannot be used (missing, unreadable, never initialised), or ``None``."""
        return home_problem(self.home, CONFIG_FILE)


def build_runtime(home_option: str | None, *, must_exist: bool = True) -> Runtime:
    """The runtime for a command line's ``--home``.

    Args:
        home_option: ``--home`` as given, if it was.
        must_exist: refuse a home that does not exist. Only ``init`` (which makes
            it) and commands that never touch the home (offline verification,
            hooks that answer for themselves) pass ``False``: anything else run
            on a mistyped ``--home`` would find no chain, no key and no config
            and report that in its own confusing words, or create files there.

    Raises:
        NoHomeError: ``must_exist`` and the home is not a directory.
        NotAHomeError: ``must_exist`` and the directory was never initialised.
    """
    home = resolve_home(home_option)
    if must_exist:
        check_home(home)
    return Runtime(home)
