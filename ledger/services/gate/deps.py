"""What the gate needs from the product (its ports), below every module of the gate.

Each module of ``services.gate`` that takes the gate's dependencies names them
by this protocol, so none has to import the gate itself.
"""

from typing import TYPE_CHECKING, Protocol

from ledger.core.config import Config
from ledger.services.chain.writer import WriterDeps
from ledger.services.ports import StateStore

if TYPE_CHECKING:
    from ledger.core.checkpoint import Checkpoint
    from ledger.core.observation import Deferred, Reading, Unreachable

    ObserverResult = Reading | Unreachable | Deferred


class GateDeps(WriterDeps, Protocol):
    """What the gate needs."""

    @property
    def config(self) -> Config:
        """The configuration."""
        ...

    @property
    def states(self) -> StateStore:
        """The derived-state store."""
        ...

    @property
    def caps_scope(self) -> str:
        """``"fleet"``: the caps in force are the store's pushed ones; else ``"host"``."""
        ...

    def operator_identity(self) -> tuple[str, str]:
        """The OS user and host deciding (sealed with a change of caps)."""
        ...

    def newest_checkpoint(self) -> "Checkpoint | None":
        """The newest signed checkpoint of the chain."""
        ...

    def observe(self, provider: str) -> "ObserverResult":
        """Run the configured UsageObserver for a provider id."""
        ...
