"""``ledger recover``: restore the longest valid prefix of a damaged chain (SPEC §5).

A chain that verifies (trust store and newest checkpoint, as ``verify-chain``
checks the home's chain) is left alone. Otherwise, under the chain lock:

1. the damaged file is copied, byte for byte, to
   ``evidence/events.jsonl.damaged-<time>`` (never overwritten, never deleted);
2. the restored chain is written atomically in its place: the newest snapshot
   that verifies (or the one ``--snapshot`` names; or none) plus every line of
   the damaged file after the snapshot's head that still chains and verifies;
   without a snapshot, the damaged file's longest verifying prefix. A torn last
   line is dropped (it survives in the evidence). A snapshot is skipped when the
   damaged file's own valid prefix is longer (a snapshot of another history);
3. checkpoints the restored chain cannot satisfy (they describe lost entries,
   or are malformed or unsigned) are moved to ``evidence/``, so that the
   recovered chain verifies while the proof of what was lost is kept;
4. every ``budget.record_call`` line after the restored chain is sealed again
   on it (``core.reseal``: honest ones and, fail-closed, those whose signature
   does not verify), so no spend is dropped; then a ``ledger.recovered``
   envelope records what was lost and names the records carried, and a fresh
   checkpoint binds the recovered chain;
5. the derived state in ``state/`` is deleted: it is rebuilt from the verified
   chain on next use.

``--dry-run`` computes the same report and changes nothing (it does not even
take the lock, which would create the lock file in a home that has none).
"""

from dataclasses import dataclass, replace
from pathlib import Path

from ledger.core.chain_check import ChainCheck, check_chain, checkpoint_fits, split_lines
from ledger.core.checkpoint import (
    Checkpoint,
    checkpoint_signature_problem,
    make_checkpoint,
)
from ledger.core.recovery import RecoveryPlan, plan_recovery
from ledger.core.reseal import RECORD_EVENT, Carried, records_after_damage
from ledger.core.schemacode import predicate
from ledger.core.signing import Signer
from ledger.core.snapshot import (
    Manifest,
    SnapshotInvalidError,
    checkpoint_from_bytes,
    manifest_from_bytes,
    manifest_name_for,
)
from ledger.core.snapshot_check import VerifiedSnapshot
from ledger.core.timefmt import format_ts
from ledger.core.trust import TrustStore
from ledger.errors import InputDataError
from ledger.services.chain.proofs import tree_root_of_lines
from ledger.services.chain.recover_report import RECOVERED_EVENT, RecoverReport
from ledger.services.chain.recover_verifying import (
    settle_verifying_chain,
    verify_locked,
    verify_unlocked,
)
from ledger.services.chain.snapshot import (
    SnapshotDeps,
    SnapshotStore,
    load_snapshot,
    read_manifests,
)
from ledger.services.chain.verify import VerifyOutcome
from ledger.services.chain.writer import Writer
from ledger.services.ports import ChainTx

_MAX_REASON = 1000


@dataclass(frozen=True, slots=True)
class _Checkpoints:
    """The home's checkpoint files: parsed ones, and those that do not parse."""

    parsed: tuple[tuple[Path, Checkpoint], ...]
    broken: tuple[tuple[Path, str], ...]

    def newest(self) -> Checkpoint | None:
        """The newest by sealed time, then entry count (as ``verify-chain`` picks it)."""
        if not self.parsed:
            return None
        return max(self.parsed, key=lambda item: (item[1].ts_utc, item[1].entries))[1]


def _clip(text: str | None) -> str | None:
    return None if text is None else text[:_MAX_REASON]


def _read_checkpoints(files: SnapshotStore) -> _Checkpoints:
    parsed: list[tuple[Path, Checkpoint]] = []
    broken: list[tuple[Path, str]] = []
    for path in files.checkpoint_files():
        try:
            parsed.append((path, checkpoint_from_bytes(files.read(path, "checkpoint"), str(path))))
        except InputDataError as exc:  # CheckpointError and SnapshotFileError among them
            broken.append((path, str(exc)))
    return _Checkpoints(tuple(parsed), tuple(broken))


def _damage(data: bytes | None, chain_name: str, check: ChainCheck, cps: _Checkpoints) -> str:
    """What is wrong with the home's chain, as ``verify-chain`` would see it."""
    if data is None:
        return f"{chain_name} is missing"
    if cps.broken:
        return f"unreadable checkpoint: {cps.broken[0][1]}"
    if check.line is None:
        return str(check.reason)
    return f"BROKEN line {check.line}: {check.reason}"


def _explicit_snapshot(files: SnapshotStore, given: Path) -> tuple[Path, Manifest]:
    if not given.name:
        raise InputDataError(f"--snapshot {str(given)!r}: not a snapshot file")
    path = given.with_name(manifest_name_for(given.name))
    return path, manifest_from_bytes(files.read(path, "snapshot"), str(path))


def _choose_snapshot(
    files: SnapshotStore,
    trust: TrustStore,
    explicit: tuple[Path, Manifest] | None,
    rejected: list[tuple[str, str]],
) -> tuple[Path, VerifiedSnapshot] | None:
    """The snapshot to restore: the one named, else the newest that verifies."""
    if explicit is not None:
        path, manifest = explicit
        return path, load_snapshot(files, path, manifest, trust)
    manifests, broken = read_manifests(files)
    rejected.extend((files.relative(path), "manifest does not parse") for path in broken)
    manifests.sort(key=lambda item: (item[1].ts_utc, item[1].entries), reverse=True)
    for path, manifest in manifests:
        try:
            return path, load_snapshot(files, path, manifest, trust)
        except (SnapshotInvalidError, InputDataError) as exc:
            rejected.append((files.relative(path), str(exc)))
    return None


def recover(
    deps: SnapshotDeps, snapshot: Path | None = None, *, dry_run: bool = False
) -> RecoverReport:
    """Recover the home's chain, or report that it needs nothing.

    Args:
        deps: the home.
        snapshot: a snapshot to restore instead of the newest that verifies (its
            manifest, or its compressed chain or checkpoint file).
        dry_run: compute and report, change nothing.

    Raises:
        InputDataError: ``snapshot`` cannot be read or parsed (exit 65); the
            trust store is unusable.
        SnapshotInvalidError: ``snapshot`` does not verify (exit 1).
        KeyFileError: no usable writer key.
        LockTimeoutError: the chain lock stayed busy (exit 75).
        ChainIOError: a file could not be read or written (exit 74).
    """
    files = deps.snapshot_files()
    trust = deps.keys.load_trust()
    explicit = None if snapshot is None else _explicit_snapshot(files, snapshot)
    checkpoints = _read_checkpoints(files)
    # A chain that verifies is read as verify-chain reads it: streaming, without
    # the lock, from the newest checkpoint's mark. Only a damaged one is read
    # whole, under the lock, to restore it.
    read = (
        None
        if checkpoints.broken
        else verify_unlocked(deps, trust, checkpoints.newest(), scan=not dry_run)
    )
    if read is None and _nothing_there(files, explicit) and files.read_chain() is None:
        # Checked before locking: taking the lock would create its file.
        return _left_alone(None, files.chain_name(), None, dry_run=dry_run)
    if dry_run:
        if read is not None:
            return _left_alone(read.outcome, files.chain_name(), checkpoints.newest(), dry_run=True)
        return _recover(deps, files, trust, explicit, None)
    with deps.chain.transaction() as tx:
        if read is not None:
            checkpoints = _read_checkpoints(files)
            newest = checkpoints.newest()
            outcome = None if checkpoints.broken else verify_locked(deps, trust, newest, read)
            if outcome is not None:
                report = _left_alone(outcome, files.chain_name(), newest, dry_run=False)
                return settle_verifying_chain(deps, tx, files, report, read)
        report = _recover(deps, files, trust, explicit, tx)
        if report.action == "none":
            report = settle_verifying_chain(deps, tx, files, report)
        return report


def _nothing_there(files: SnapshotStore, explicit: tuple[Path, Manifest] | None) -> bool:
    """No snapshot and no checkpoint: a missing chain is a new home, not a loss."""
    return explicit is None and not files.snapshot_manifests() and not files.checkpoint_files()


def _recover(
    deps: SnapshotDeps,
    files: SnapshotStore,
    trust: TrustStore,
    explicit: tuple[Path, Manifest] | None,
    tx: ChainTx | None,
) -> RecoverReport:
    dry_run = tx is None
    data = files.read_chain()
    checkpoints = _read_checkpoints(files)
    newest = checkpoints.newest()
    lines = split_lines(data) if data is not None else []
    check = check_chain(lines, trust, newest)
    chain_name = files.chain_name()
    if data is None and _nothing_there(files, explicit):
        return _left_alone(None, chain_name, newest, dry_run=dry_run)
    if data is not None and check.ok and not checkpoints.broken:
        return _left_alone(check, chain_name, newest, dry_run=dry_run)
    # The key that will sign ledger.recovered, loaded before anything changes.
    signer = deps.keys.active_signer(trust)
    rejected: list[tuple[str, str]] = []
    chosen = _choose_snapshot(files, trust, explicit, rejected)
    plan = plan_recovery(lines, trust, chosen[1] if chosen else None)
    if chosen is not None and explicit is None:
        alone = plan_recovery(lines, trust)
        if alone.entries > plan.entries:
            rejected.append(
                (
                    files.relative(chosen[0]),
                    f"restores {plan.entries} entries, the damaged file alone {alone.entries}",
                )
            )
            chosen, plan = None, alone
    damage = _damage(data, chain_name, check, checkpoints)
    newest_signed = _newest_signed(checkpoints, trust)
    retire = [path for path, _reason in checkpoints.broken] + [
        path for path, cp in checkpoints.parsed if not checkpoint_fits(cp, plan.lines, trust)
    ]
    stamp = format_ts(deps.clock.now()).replace("-", "").replace(":", "").replace(".", "")
    conforms = predicate(deps.schema(RECORD_EVENT))
    carried = records_after_damage(lines, plan.lines, plan.last_kept_line, trust, conforms)
    report = RecoverReport(
        action="recover",
        dry_run=dry_run,
        message=_message(plan, chosen, files, carried, dry_run=dry_run),
        damage=_clip(damage),
        damaged_lines=plan.damaged_lines,
        restored_entries=plan.entries,
        snapshot_entries=plan.base_entries,
        lost_lines=plan.lost_lines,
        first_lost_line=plan.first_lost_line,
        reason=_clip(plan.reason),
        snapshot=None if chosen is None else files.relative(chosen[0]),
        evidence=None if data is None else files.relative(files.damaged_evidence_path(stamp)),
        head_hash=plan.head_hash,
        checkpoint_entries=None if newest_signed is None else newest_signed.entries,
        checkpoints_retired=tuple(files.relative(files.evidence_path(p.name)) for p in retire),
        snapshots_rejected=tuple(rejected),
        resealed=tuple(item.summary() for item in carried),
    )
    if tx is None:
        return report
    return _apply(deps, files, signer, tx, report, plan, (data, carried), retire, stamp)


def _apply(
    deps: SnapshotDeps,
    files: SnapshotStore,
    signer: Signer,
    tx: ChainTx,
    report: RecoverReport,
    plan: RecoveryPlan,
    damaged: tuple[bytes | None, tuple[Carried, ...]],
    retire: list[Path],
    stamp: str,
) -> RecoverReport:
    """Carry out a recovery; the order keeps every crash point recoverable again.

    Evidence first; then the chain (a crash here leaves the old checkpoints in
    place, so the restored chain fails verification and ``recover`` runs again);
    then the checkpoints; then the carried records, the record of the recovery,
    a fresh checkpoint, the state. A crash after some carried records leaves a
    chain that verifies without ``ledger.recovered``: the evidence file keeps
    the rest, and the records sealed so far keep their idempotency keys.
    """
    data, carried = damaged
    evidence = None if data is None else files.relative(files.keep_damaged(data, stamp))
    files.replace_chain(b"".join(plan.lines))
    retired = tuple(files.relative(files.retire(path)) for path in retire)
    writer = Writer(deps)
    hashes = tuple(
        writer.append(tx, RECORD_EVENT, item.payload, signer=signer).entry_hash for item in carried
    )
    final = replace(report, evidence=evidence, checkpoints_retired=retired, resealed_hashes=hashes)
    sealed = writer.append(tx, RECOVERED_EVENT, final.payload(), signer=signer)
    deps.write_checkpoint(
        make_checkpoint(
            signer,
            plan.genesis_hash or (hashes[0] if hashes else sealed.entry_hash),
            plan.entries + len(hashes) + 1,
            sealed.entry_hash,
            sealed.ts_utc,
            tree_root_of_lines(plan.lines, [*hashes, sealed.entry_hash]),
        )
    )
    cleared = tuple(files.relative(path) for path in files.clear_state())
    return replace(final, state_cleared=cleared, entry_hash=sealed.entry_hash)


def _newest_signed(checkpoints: _Checkpoints, trust: TrustStore) -> Checkpoint | None:
    signed = [
        cp for _p, cp in checkpoints.parsed if checkpoint_signature_problem(cp, trust) is None
    ]
    return max(signed, key=lambda cp: (cp.ts_utc, cp.entries)) if signed else None


def _message(
    plan: RecoveryPlan,
    chosen: tuple[Path, VerifiedSnapshot] | None,
    files: SnapshotStore,
    carried: tuple[Carried, ...] = (),
    *,
    dry_run: bool,
) -> str:
    verb = "would restore" if dry_run else "restored"
    source = (
        "no snapshot"
        if chosen is None
        else f"{plan.base_entries} from snapshot {files.relative(chosen[0])}"
    )
    from_file = plan.entries - plan.base_entries
    text = (
        f"{verb} {plan.entries} entries ({source}, {from_file} from the damaged file); "
        f"{plan.lost_lines} of {plan.damaged_lines} lines of the damaged file lost"
    )
    if plan.first_lost_line is not None:
        text += f" from line {plan.first_lost_line} ({plan.reason})"
    if carried:
        honest = sum(1 for item in carried if item.verified)
        text += (
            f"; {len(carried)} record(s) after the damage "
            + ("would be " if dry_run else "")
            + f"sealed again so their spend counts ({honest} verified"
            + (
                f", {len(carried) - honest} not verified: counted until "
                "`ledger reconcile --force-reason`)"
                if honest < len(carried)
                else ")"
            )
        )
    return text + ("; dry run: nothing changed" if dry_run else "")


def _left_alone(
    check: ChainCheck | VerifyOutcome | None,
    chain_name: str,
    newest: Checkpoint | None,
    *,
    dry_run: bool,
) -> RecoverReport:
    """The report of a chain left as it is: one that verifies (``check``), or none at all."""
    entries = 0 if check is None else check.entries
    message = (
        f"{chain_name} is missing and there is no snapshot or checkpoint: nothing to recover"
        if check is None
        else f"chain verifies ({entries} entries); left alone"
    )
    return RecoverReport(
        action="none",
        dry_run=dry_run,
        message=message,
        damage=None,
        # The home's own chain holds no markers, so a verifying one has a line per entry.
        damaged_lines=entries,
        restored_entries=entries,
        snapshot_entries=0,
        lost_lines=0,
        first_lost_line=None,
        reason=None,
        snapshot=None,
        evidence=None,
        head_hash=None if check is None else check.head_hash,
        checkpoint_entries=None if newest is None else newest.entries,
    )


__all__ = ["RECOVERED_EVENT", "RecoverReport", "recover"]
