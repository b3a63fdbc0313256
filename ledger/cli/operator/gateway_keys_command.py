"""``ledger keys issue | list | revoke-gateway``: the keys agents present to the gateway."""

from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_json


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


def keys_issue(
    name: Annotated[str, typer.Argument(help="The key's name (^[a-z][a-z0-9_-]{0,63}$).")],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            help="The agent every request with this key is made as (default: the key's NAME).",
        ),
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="A tag every request with this key carries; repeatable."),
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option("--expires", help="ISO-8601 time with a zone after which the key is refused."),
    ] = None,
    role: Annotated[
        str | None,
        typer.Option(
            "--role",
            help="admin or viewer: a console key (lc_...) for `ledger console`, which the "
            "gateway refuses; without it, a gateway key.",
        ),
    ] = None,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            metavar="NAME=USD",
            help='The key\'s own cap in budget NAME (which has per = "key"), written into '
            "its usd_for in ledger.toml.",
        ),
    ] = None,
) -> None:
    """Issue a gateway key (or with --role a console key); its secret is printed once.

    Only the key's hash is kept. A gateway key (lk_...) is presented to `ledger
    proxy`; a console key (lc_..., --role admin|viewer) signs in to `ledger console`.
    With --budget NAME=USD the key gets its own cap in a per = "key" budget:
    the same usd_for entry as written by hand, ahead of any glob.

    Example: ledger keys issue ci --agent ci-bot --tag team:infra --expires 2027-01-01T00:00:00Z

    Example: ledger keys issue alice --budget team=5

    Example: ledger keys issue lead --role admin
    """

    def body() -> int:
        from ledger.core.timefmt import parse_iso8601
        from ledger.errors import UsageError
        from ledger.services.gate.budget_views import key_name, tag_list
        from ledger.services.gate.call_args import text_arg
        from ledger.services.gateway_keys import issue_capped_key, issue_key

        until = None
        if expires is not None:
            try:
                until = parse_iso8601(expires)
            except ValueError as exc:
                raise UsageError(f"--expires: {exc}") from exc
        checked = key_name(name)
        assert checked is not None  # noqa: S101 - a name was given
        if role is not None and role not in ("admin", "viewer"):
            raise UsageError(f"--role: {role!r} must be admin or viewer")
        if budget is not None and role is not None:
            raise UsageError("--budget: a console key (--role) spends nothing; give it no budget")
        key_agent, key_tags = text_arg(agent, "--agent"), tag_list(tag or [])
        if budget is not None:
            key, secret = issue_capped_key(_runtime(), checked, budget, key_agent, key_tags, until)
        else:
            key, secret = issue_key(_runtime(), checked, key_agent, key_tags, until, role)
        shown = key._asdict()
        del shown["digest"]
        print_json({**shown, "tags": list(key.tags), "role": key.role or "gateway", "key": secret})
        return 0

    _exit(guarded(body))


def keys_list() -> None:
    """List the gateway and console keys (name, role, agent, tags, expiry, state); never a secret.

    Example: ledger keys list
    """

    def body() -> int:
        from ledger.services.gateway_keys import list_keys

        print_json({"keys": list_keys(_runtime())})
        return 0

    _exit(guarded(body))


def keys_revoke_gateway(
    name: Annotated[str, typer.Argument(help="The gateway key to refuse from now on.")],
) -> None:
    """Revoke a gateway key: from now on the gateway answers its requests 401.

    Example: ledger keys revoke-gateway ci
    """

    def body() -> int:
        from ledger.services.gateway_keys import revoke_key

        print_json(revoke_key(_runtime(), name))
        return 0

    _exit(guarded(body))


def register(app: Any) -> None:
    """Add the gateway key commands to ``ledger keys``."""
    from ledger.cli.operator.keys_commands import keys_app

    del app
    keys_app.command("issue")(keys_issue)
    keys_app.command("list")(keys_list)
    keys_app.command("revoke-gateway")(keys_revoke_gateway)
