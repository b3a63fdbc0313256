"""``ledger verify-chain``: SPEC §3's output and exit codes."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli.output import print_json
from ledger.core.envelope import KEY_ID_RE
from ledger.core.trust import TrustedKey, TrustStore, trust_from_document
from ledger.errors import EXIT_HALT, EXIT_USAGE

if TYPE_CHECKING:
    from ledger.runtime import Runtime


def _parse_key_option(value: str) -> tuple[str | None, Path]:
    key_id, sep, rest = value.partition("=")
    if sep and rest and KEY_ID_RE.fullmatch(key_id) and not Path(value).exists():
        return key_id, Path(rest)
    return None, Path(value)


def _progress(done: int, total: int) -> None:
    sys.stderr.write(f"\rverifying: {100 * done // max(total, 1)}%")
    sys.stderr.flush()


def _sync_merkle_index(runtime: "Runtime", *, full: bool) -> None:
    """Hold the Merkle node index against the verified chain; rebuild it if it differs.

    ``full`` checks every stored node; otherwise the entries since the index's
    mark are added and its root is held to the newest checkpoint's.
    """
    from ledger.errors import LedgerError
    from ledger.services.chain.merkle_sync import catch_up_checked, sync_index

    try:
        with (
            runtime.chain.read_transaction(),
            runtime.exclusive("merkle-index"),
            runtime.merkle_index() as index,
        ):
            if full:
                _size, _root, rebuilt = sync_index(index, runtime.chain)
            else:
                rebuilt = catch_up_checked(index, runtime.chain, runtime.newest_checkpoint())
    except LedgerError as exc:
        sys.stderr.write(f"ledger: the Merkle index could not be checked: {exc}\n")
        return
    if rebuilt:
        sys.stderr.write("ledger: the Merkle index did not match the chain; rebuilt it\n")


def _state_size(runtime: "Runtime") -> int | None:
    """How many entries the home's derived state has folded, if it can be read."""
    from ledger.errors import LedgerError

    try:
        stored = runtime.states.load()
    except LedgerError:
        return None
    return None if stored is None else stored.size


def _home_chain(runtime: "Runtime") -> object:
    """The home's chain as it is: a fleet's rows are read without sealing anything spooled."""
    chain = runtime.chain
    return runtime.pg_chain if runtime.uses_database else chain


def _use_archive(store: object, archive: Path | None) -> bool:
    """Read archived segments from ``archive`` too; ``False`` when it is no folder."""
    segments = getattr(store, "segments", None)
    if archive is None or segments is None:
        return True
    if not archive.is_dir():
        sys.stderr.write(f"ledger: --archive {archive}: no such folder\n")
        return False
    segments.archive = archive
    return True


def run_verify(
    home: str | None,
    log: Path | None,
    keys: list[str],
    trust_store: Path | None,
    checkpoint: Path | None,
    *,
    strict: bool,
    allow_markers: bool,
    as_json: bool,
    full: bool = False,
    jobs: int | None = None,
    archive: Path | None = None,
) -> int:
    """Verify a chain and print the result; returns the exit code."""
    from ledger.edges.fileio import read_json_file
    from ledger.edges.files.chainfile import ChainFile
    from ledger.edges.files.checkpointfiles import load_checkpoint
    from ledger.edges.files.keyfiles import load_public_key_file
    from ledger.runtime import build_runtime
    from ledger.services.chain.verify import (
        committed_bound,
        held_against_state,
        resume_point,
        verify_store,
    )

    # Verifying a given LOG needs only what the command line gives, no home.
    runtime = build_runtime(home, must_exist=log is None)
    if log is not None:
        # Missing is a bad command line (SPEC §3); something that is there but is
        # not a regular file (a FIFO, a directory) is an I/O failure the store
        # reports without blocking. An auditor's LOG may be a symbolic link.
        if not log.exists():
            sys.stderr.write(f"ledger: {log}: no such chain file\n")
            return EXIT_USAGE
        store = ChainFile(log, follow_symlinks=True)
        trust = TrustStore()
        cp = None
    else:
        # Either store; one with no entries yet verifies as OK 0 entries unless a
        # checkpoint or the derived state shows that entries existed.
        store = _home_chain(runtime)  # type: ignore[assignment]
        if not _use_archive(store, archive):
            return EXIT_USAGE
        trust = runtime.keys.load_trust() if trust_store is None else TrustStore()
        cp = runtime.newest_checkpoint() if checkpoint is None else None
    if trust_store is not None:
        trust = trust_from_document(
            read_json_file(trust_store, "trust store"), source=str(trust_store)
        )
    for option in keys:
        key_id, path = _parse_key_option(option)
        raw = load_public_key_file(path)
        trust = (
            trust.with_any_id_key(raw)
            if key_id is None
            else trust.with_key(TrustedKey(key_id, raw))
        )
    if checkpoint is not None:
        cp = load_checkpoint(checkpoint)
    show_progress = not as_json and sys.stderr.isatty()
    # The home's chain is read without its lock, up to the head read now: a
    # line appended meanwhile is neither waited for nor taken for a torn tail.
    end = committed_bound(store) if log is None else None
    # Only the home's own chain, under the home's own rules, resumes where its
    # newest checkpoint's verification ended: other keys or rules judge anew.
    home_rules = log is None and trust_store is None and not keys and checkpoint is None
    resume = None
    if home_rules and not full and not strict and not allow_markers:
        resume = resume_point(store, trust, cp, runtime.verified_mark())
    outcome = verify_store(
        store, trust, cp, strict=strict, allow_markers=allow_markers,
        progress=_progress if show_progress else None, end=end, resume=resume, workers=jobs,
    )  # fmt: skip
    if show_progress:
        sys.stderr.write("\r")
    if log is None:
        outcome = held_against_state(outcome, _state_size(runtime))
    if as_json:
        print_json(
            {"ok": outcome.ok, "entries": outcome.entries, "line": outcome.line,
             "reason": outcome.reason}
        )  # fmt: skip
    if outcome.ok:
        if log is None and outcome.entries:
            _sync_merkle_index(runtime, full=resume is None)
        if not as_json:
            sys.stdout.write(f"OK {outcome.entries} entries\n")
        return 0
    if outcome.line is None:
        sys.stderr.write(f"ledger: {outcome.reason}\n")
    else:
        sys.stderr.write(f"BROKEN line {outcome.line}: {outcome.reason}\n")
    if log is None and trust_store is None and not keys and not strict:
        # Found under the home's own rules: the gate must not go on admitting
        # spend on top of this chain. Other keys or rules judge something else.
        _remember(runtime, outcome.line, outcome.reason or "does not verify")
    return EXIT_HALT


def _remember(runtime: "Runtime", line: int | None, reason: str) -> None:
    from ledger.errors import LedgerError
    from ledger.services.chain.findings import remember_finding

    try:
        remember_finding(runtime, line, reason)
    except LedgerError as exc:
        sys.stderr.write(f"ledger: the finding could not be kept for the gate: {exc}\n")
