"""``ledger prove inclusion|consistency`` and ``ledger verify-proof`` (SPEC §10).

Exit codes: ``prove`` 0 printed; 1 no such entry, no checkpoint with a tree
head, or a checkpoint that does not match the chain; 2 a malformed
``N|ENTRY_HASH`` or a prefix that names more than one entry; 65 an unreadable
checkpoint. ``verify-proof`` 0 valid; 1 invalid; 2 no key to check the
checkpoint with; 65 an unreadable proof, checkpoint, key or entry file.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_error, print_json
from ledger.core.refs import FULL_REF_DIGITS, MIN_REF_PREFIX, REF_PREFIX_RE
from ledger.errors import EXIT_HALT, UsageError

prove_app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Merkle proofs against signed checkpoints: one entry's inclusion, or that "
        "a newer checkpoint extends an older one.\n\n"
        "Example: ledger prove inclusion 42 > proof.json"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


def parse_target(text: str) -> int | str:
    """An entry number (from 1), or an entry hash or a prefix of one (12+ hex digits).

    Digits alone are a number.

    Raises:
        UsageError: neither.
    """
    if text.isdigit() and text.isascii():
        number = int(text)
        if number >= 1:
            return number
    if REF_PREFIX_RE.fullmatch(text):
        return text
    raise UsageError(
        f"{text!r} is neither an entry number (from 1) nor an entry hash "
        f"({MIN_REF_PREFIX} to {FULL_REF_DIGITS} lowercase hex digits)"
    )


@prove_app.command("inclusion")
def prove_inclusion_command(
    target: Annotated[
        str,
        typer.Argument(
            metavar="N|ENTRY_HASH",
            help="The entry: its number (lines count from 1), or its entry hash / verdict_ref "
            "or a unique prefix of 12+ hex digits.",
        ),
    ],
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="Prove against this checkpoint's tree head (default: the home's newest).",
        ),
    ] = None,
) -> None:
    """Print the audit path of one entry to a signed checkpoint's Merkle root.

    Prints leaf_index (from 0), tree_size, root_hash, entry_hash and audit_path
    (RFC 9162 §2.1.3). Reads O(log n) index nodes after catching the index up.

    Example: ledger --home ./.ledger prove inclusion 3f2a…c9 > proof.json
    """

    def body() -> int:
        from ledger.edges.files.checkpointfiles import load_checkpoint
        from ledger.services.chain.proofs import prove_inclusion

        parsed = parse_target(target)
        cp = None if checkpoint is None else load_checkpoint(checkpoint)
        print_json(prove_inclusion(_runtime(), parsed, cp).to_document())
        return 0

    _exit(guarded(body))


@prove_app.command("consistency")
def prove_consistency_command(
    old_checkpoint: Annotated[
        Path, typer.Argument(metavar="OLD_CHECKPOINT", help="The older checkpoint file.")
    ],
    new_checkpoint: Annotated[
        Path, typer.Argument(metavar="NEW_CHECKPOINT", help="The newer checkpoint file.")
    ],
) -> None:
    """Print the proof that NEW_CHECKPOINT's tree extends OLD_CHECKPOINT's.

    Prints old_size, new_size, old_root, new_root and proof (RFC 9162 §2.1.4).

    Example: ledger prove consistency checkpoints/monday.json checkpoints/tuesday.json
    """

    def body() -> int:
        from ledger.edges.files.checkpointfiles import load_checkpoint
        from ledger.services.chain.proofs import prove_consistency

        old = load_checkpoint(old_checkpoint)
        new = load_checkpoint(new_checkpoint)
        print_json(prove_consistency(_runtime(), old, new).to_document())
        return 0

    _exit(guarded(body))


def verify_proof_command(
    proof_file: Annotated[
        Path, typer.Argument(metavar="PROOF_FILE", help="A proof printed by `ledger prove`.")
    ],
    checkpoint: Annotated[
        list[Path],
        typer.Option(
            "--checkpoint",
            help=(
                "A signed checkpoint the proof must match (repeat for both sides of a "
                "consistency proof)."
            ),
        ),
    ],
    key: Annotated[
        Path | None,
        typer.Option(
            "--key", help="The writer's public key PEM (default: the home's trust store)."
        ),
    ] = None,
    entry: Annotated[
        Path | None,
        typer.Option(
            "--entry",
            help="A file holding the entry's line: it must be the entry the proof names.",
        ),
    ] = None,
) -> None:
    """Check a proof offline against signed checkpoints: exit 0 valid, 1 invalid.

    Exit 65 when the proof, a checkpoint, the key or the entry file cannot be read.

    Example: ledger verify-proof proof.json --checkpoint cp.json --key w.pub.pem --entry line.jsonl
    """

    def body() -> int:
        from ledger.core.proof_check import check_proof
        from ledger.core.trust import TrustStore
        from ledger.edges.fileio import read_json_file, read_user_file
        from ledger.edges.files.checkpointfiles import load_checkpoint
        from ledger.edges.files.keyfiles import load_public_key_file

        document = read_json_file(proof_file, "proof")
        checkpoints = [load_checkpoint(path) for path in checkpoint]
        line = None if entry is None else read_user_file(entry, "entry file")
        if key is not None:
            trust = TrustStore().with_any_id_key(load_public_key_file(key))
        else:
            runtime = _runtime()
            if not runtime.has_trust_store():
                raise UsageError("no trust store in the home: give --key PEM")
            trust = runtime.keys.load_trust()
        verdict = check_proof(document, checkpoints, trust, line, str(proof_file))
        print_json({"ok": verdict.ok, "kind": verdict.kind, "reason": verdict.reason})
        if not verdict.ok:
            print_error(f"proof does not verify: {verdict.reason}")
            return EXIT_HALT
        return 0

    _exit(guarded(body))


def register(app: Any) -> None:
    """Add ``prove`` and ``verify-proof`` to the typer app."""
    app.add_typer(prove_app, name="prove")
    app.command("verify-proof")(verify_proof_command)
