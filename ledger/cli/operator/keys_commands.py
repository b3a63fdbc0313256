"""``ledger keys``: the writer keys (rotate, pin an offline root, revoke, trust another's).

The gateway keys (``issue``, ``list``, ``revoke-gateway``) and ``enroll`` join
the same group from their own modules.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_error, print_json
from ledger.errors import UsageError

keys_app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Writer keys: rotate, pin an offline root, revoke, trust another writer's key."
        "\n\nExample: ledger keys rotate"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


@keys_app.command("rotate")
def keys_rotate(
    root_key: Annotated[
        Path | None,
        typer.Option("--root-key", help="Offline root private key, when the home pins one."),
    ] = None,
) -> None:
    """Make a new writer key; the old key signs a ledger.key_rotated naming it.

    Example: ledger --home ./.ledger keys rotate
    """

    def body() -> int:
        from ledger.services.chain.home import rotate_key

        root = load_root(root_key) if root_key is not None else None
        runtime = _runtime()
        backfill_strict_after(runtime, root)
        result = rotate_key(runtime, root)
        print_json(
            {
                "old_key_id": result.old_key_id,
                "new_key_id": result.new_key_id,
                "rotated_at": result.rotated_at,
                "entry_hash": result.entry_hash,
            }
        )
        return 0

    _exit(guarded(body))


def backfill_strict_after(runtime: Any, root: Any) -> None:
    """Give an older home's trust store its ``strict_after``, noting it on stderr."""
    from ledger.services.chain.home import ensure_strict_after

    note = ensure_strict_after(runtime, root)
    if note:
        print_error(f"note: {note}")


def load_root(path: Path) -> Any:
    """The offline root key in the PEM file at ``path``, as a signer."""
    from ledger.core.signing import Signer, private_key_from_pem
    from ledger.edges.fileio import read_user_file

    return Signer.from_private_key(
        private_key_from_pem(read_user_file(path, "root key"), str(path))
    )


@keys_app.command("pin-root")
def keys_pin_root(
    root_key: Annotated[Path, typer.Option("--root-key", help="Offline root private key PEM.")],
) -> None:
    """Sign trust.json with an offline root key and pin its public key in the home.

    Example: ledger --home ./.ledger keys pin-root --root-key /media/offline/root.pem
    """

    def body() -> int:
        from ledger.core.signing import public_pem
        from ledger.services.chain.home import pin_root

        runtime = _runtime()
        root = load_root(root_key)
        backfill_strict_after(runtime, root)
        key_id = pin_root(
            runtime,
            root,
            lambda raw: runtime.write_file(runtime.keys.root_pin_path, public_pem(raw)),
        )
        print_json({"root_key_id": key_id, "pinned": str(runtime.keys.root_pin_path)})
        return 0

    _exit(guarded(body))


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The signing_key_id to revoke.")],
    reason: Annotated[
        str, typer.Option("--reason", help="Why the key is revoked, kept in the trust store.")
    ] = "",
    at: Annotated[
        str | None,
        typer.Option("--at", help="Revoke from this ISO-8601 time (default: entirely)."),
    ] = None,
    root_key: Annotated[
        Path | None,
        typer.Option("--root-key", help="Offline root private key, when the home pins one."),
    ] = None,
) -> None:
    """Revoke a retired writer key: its signatures (from --at on) stop verifying.

    Example: ledger keys revoke 3f9a0c1d2e4b5a69 --reason 'laptop lost'
    """

    def body() -> int:
        from ledger.core.timefmt import format_ts, parse_iso8601
        from ledger.services.chain.home import revoke_key

        moment = None
        if at is not None:
            try:
                moment = parse_iso8601(at)
            except ValueError as exc:
                raise UsageError(f"--at: {exc}") from exc
        root = load_root(root_key) if root_key is not None else None
        runtime = _runtime()
        backfill_strict_after(runtime, root)
        revoke_key(runtime, key_id, reason, moment, root)
        print_json(
            {"revoked": key_id, "revoked_at": format_ts(moment) if moment else None,
             "reason": reason}
        )  # fmt: skip
        return 0

    _exit(guarded(body))


@keys_app.command("trust")
def keys_trust(
    key: Annotated[
        str,
        typer.Argument(
            help="ID=PEM: the signing_key_id another writer (loa) uses, and its public key file."
        ),
    ],
    root_key: Annotated[
        Path | None,
        typer.Option("--root-key", help="Offline root private key, when the home pins one."),
    ] = None,
) -> None:
    """Trust another writer's public key to verify its entries; it never signs here.

    For taking over a chain that loa began (README: Switching from loa).

    Example: ledger keys trust demo-writer=loa-writer.pub.pem
    """

    def body() -> int:
        from ledger.core.envelope import KEY_ID_RE
        from ledger.edges.files.keyfiles import load_public_key_file
        from ledger.services.chain.home import trust_foreign_key

        key_id, sep, pem = key.partition("=")
        if not sep or not KEY_ID_RE.fullmatch(key_id) or not pem:
            raise UsageError("KEY: expected ID=PEM, with ID matching ^[a-z0-9_-]+$")
        public_raw = load_public_key_file(Path(pem))
        root = load_root(root_key) if root_key is not None else None
        runtime = _runtime()
        backfill_strict_after(runtime, root)
        changed = trust_foreign_key(runtime, key_id, public_raw, root)
        print_json({"trusted": key_id, "signs": False, "changed": changed})
        return 0

    _exit(guarded(body))


def register(app: typer.Typer) -> None:
    """Add the ``keys`` group to ``app``."""
    app.add_typer(keys_app, name="keys")
