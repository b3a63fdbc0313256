"""A home's folders and the files the runtime reads from them without a store.

The price snapshot (SPEC §7), the verification mark, the Merkle node index
and the home's access check. ``HomeFiles`` is a base of
``ledger.runtime.Runtime``, which sets ``home``.
"""

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.edges.fileio import atomic_write
from ledger.errors import ChainIOError

if TYPE_CHECKING:
    import datetime as dt

    from ledger.core.verified_mark import VerifiedMark
    from ledger.edges.files.merkle_index import FileNodeIndex

# Where the newest checkpoint's verification ended (derived state: the next
# verification and checkpoint resume there).
_VERIFIED_MARK = "verified-mark.json"
_PRICE_FILE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


class HomeFiles:
    """A home's folders and the files in them that need no store to be read."""

    home: Path

    @property
    def state_dir(self) -> Path:
        """Where derived state is kept (rebuildable from the chain)."""
        return self.home / "state"

    @property
    def checkpoints_dir(self) -> Path:
        """Where checkpoints are kept."""
        return self.home / "checkpoints"

    @property
    def snapshots_dir(self) -> Path:
        """Where snapshots are kept."""
        return self.home / "snapshots"

    @property
    def prices_dir(self) -> Path:
        """Where the price snapshot is kept (one file per provider, SPEC §7)."""
        return self.home / "prices"

    def price_file(self, provider: str) -> bytes | None:
        """One provider's price snapshot file, or ``None`` when there is none.

        Raises:
            ChainIOError: the file exists but cannot be read.
        """
        if not _PRICE_FILE_RE.fullmatch(provider):
            return None
        try:
            return (self.prices_dir / f"{provider}.json").read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ChainIOError(f"cannot read the price snapshot for {provider}: {exc}") from exc

    def has_price_file(self, provider: str) -> bool:
        """Whether the price snapshot has a file for ``provider`` (one stat)."""
        if not _PRICE_FILE_RE.fullmatch(provider):
            return False
        return (self.prices_dir / f"{provider}.json").is_file()

    def price_providers(self) -> tuple[str, ...]:
        """The providers the price snapshot has a file for (none when it cannot be listed)."""
        try:
            stems = [path.stem for path in self.prices_dir.iterdir() if path.suffix == ".json"]
        except OSError:
            return ()
        return tuple(stem for stem in stems if _PRICE_FILE_RE.fullmatch(stem))

    def library_providers(self) -> tuple[str, ...]:
        """The providers genai-prices knows (slow to import: asked only when nothing else knows)."""
        from ledger.edges.pricebook import library_providers

        return library_providers()

    def build_price_snapshot(self, now: "dt.datetime") -> dict[str, bytes]:
        """genai-prices' rates in effect at ``now``, one file per provider."""
        from ledger.edges.pricebook import build_snapshot

        return build_snapshot(now)

    def write_price_files(self, files: dict[str, bytes]) -> str:
        """Write every snapshot file atomically; returns the folder."""
        self.prices_dir.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            if _PRICE_FILE_RE.fullmatch(name.removesuffix(".json")):
                atomic_write(self.prices_dir / name, data)
        return str(self.prices_dir.resolve())

    def verified_mark(self) -> "VerifiedMark | None":
        """Where the last checkpoint's verification ended (derived; ``None`` if unknown)."""
        from ledger.edges.files.checkpointfiles import load_mark

        return load_mark(self.state_dir / _VERIFIED_MARK)

    def keep_verified_mark(self, mark: "VerifiedMark") -> None:
        """Keep where a checkpoint's verification ended, for the next one to resume at."""
        from ledger.edges.files.checkpointfiles import save_mark

        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        save_mark(self.state_dir / _VERIFIED_MARK, mark)

    def merkle_index(self) -> "FileNodeIndex":
        """The Merkle node index (derived state; a context manager that closes it)."""
        from ledger.edges.files.merkle_index import FileNodeIndex

        return FileNodeIndex(self.state_dir / "merkle")

    def access_problem(self) -> str | None:
        """Why this OS user cannot read and write the home as a hook must (with the fix)."""
        from ledger.edges.homeaccess import access_problem

        return access_problem(self.home)
