"""One locked read-decide-append step over the derived state, for agent budgets.

Inside the chain lock: load the counter (derived state checked against the
chain head), decide, append any envelopes (folded into the counter when it is
trustworthy), then store the counter. Check and reserve are therefore atomic
across processes, as for the USD gate.
"""

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ledger.core.agents import ensure_tables
from ledger.core.config import Config
from ledger.core.seal import SealedEntry, chain_time
from ledger.core.signing import Signer
from ledger.core.state import empty_state
from ledger.core.timefmt import format_ts
from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger.core.checkpoint import Checkpoint

from ledger.services.chain.counter import Counter, counter_problem
from ledger.services.chain.state import fold_sealed, load_counter, save_counter
from ledger.services.chain.writer import Writer, WriterDeps
from ledger.services.ports import ChainTx, StateStore


class AgentDeps(WriterDeps, Protocol):
    """What agent budgets need: the writer's needs, the config and the derived state."""

    @property
    def config(self) -> Config:
        """The configuration."""
        ...

    @property
    def states(self) -> StateStore:
        """The derived-state store."""
        ...

    def newest_checkpoint(self) -> "Checkpoint | None":
        """The newest signed checkpoint of the chain."""
        ...


class AgentSession(NamedTuple):
    """The chain while locked, with its counter and the time of this step."""

    tx: ChainTx | None
    counter: Counter
    now: dt.datetime  # the chain's time: the local clock, never before the head
    problem: str | None
    writer: Writer | None
    signer: Signer | None

    @property
    def agents(self) -> dict[str, Any]:
        """The folded agent-budget state."""
        return ensure_tables(self.counter.data.setdefault("agents", {}))

    @property
    def now_ts(self) -> str:
        """``now`` in the chain's format."""
        return format_ts(self.now)

    def append(self, event_type: str, payload: dict[str, Any]) -> SealedEntry:
        """Seal one event; fold it when the counter is trustworthy.

        Raises:
            TornTailError, ChainIOError: the chain cannot be appended to.
            SchemaValidationError: the payload does not match its schema.
        """
        assert self.writer is not None  # noqa: S101 - read-only sessions never append
        assert self.tx is not None  # noqa: S101 - a writing session holds the lock
        # The writer looks the active key up under the lock: a rotation by
        # another process since this session started is never raced.
        sealed = self.writer.append(self.tx, event_type, payload, now=self.now)
        fold_sealed(self.counter, sealed, self.tx.head())
        return sealed


def _nothing_recorded(deps: AgentDeps) -> bool:
    """No chain and no derived state: the budgets are all empty."""
    if deps.chain.exists():
        return False
    try:
        return deps.states.load() is None
    except LedgerError:
        return False  # the locked path reports the mismatch


@contextmanager
def agent_session(deps: AgentDeps, *, write: bool = True) -> Iterator[AgentSession]:
    """Hold the chain lock for one step; store the counter afterwards.

    Raises:
        LockTimeoutError: the lock stayed busy.
        KeyFileError, InputDataError: ``write`` and no usable writer key.
    """
    if not write and _nothing_recorded(deps):
        # A read needs no lock, and must not create a home where there is none.
        empty = Counter(empty_state(), None)
        yield AgentSession(None, empty, deps.clock.now(), None, None, None)
        return
    writer = Writer(deps) if write else None
    signer = writer.signer() if writer is not None else None
    with deps.chain.transaction() as tx:
        counter = load_counter(tx, deps)
        head = counter.head
        now = chain_time(deps.clock.now(), head.ts_utc if head is not None else None)
        session = AgentSession(
            tx, counter, now, counter_problem(counter, deps.config), writer, signer
        )
        yield session
        if counter.problem is None:
            save_counter(counter, deps.states)
