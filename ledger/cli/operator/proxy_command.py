"""``ledger proxy``: the gateway for every model call that passes through it."""

from typing import Annotated, Any

import typer

from ledger.cli.operator.shared import exit_with
from ledger.cli.output import guarded


def proxy_command(
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            help="HOST:PORT to listen on (default: proxy.listen, else 127.0.0.1:8787). "
            "An address other machines can reach needs proxy.require_keys.",
        ),
    ] = None,
) -> None:
    """Gate every Anthropic and OpenAI model call sent through this address.

    Point ANTHROPIC_BASE_URL / OPENAI_BASE_URL (or an SDK's base_url) at it.
    POST /v1/messages, /v1/chat/completions and /v1/responses get a verdict on
    the request's estimate before they are forwarded (402 on a halt, nothing
    sent) and are recorded once from the response's usage. GET /v1/models and
    POST /v1/messages/count_tokens pass unchanged; other paths get 404 unless
    listed in proxy.passthrough. Each provider's key goes to its own upstream
    only; a gateway key (lk_...) is never forwarded. At start it logs (stderr)
    each provider's resolved upstream URL. SIGTERM drains in-flight calls, then
    exit 0.

    Example: ledger --home /var/lib/ledger proxy --listen 127.0.0.1:8787
    """

    def body() -> int:
        from ledger.cli.operator.shared import State
        from ledger.gateway.serve import run_proxy
        from ledger.homes import resolve_home

        return run_proxy(resolve_home(State.home), listen)

    exit_with(guarded(body))


def register(app: Any) -> None:
    """Add ``proxy`` to the typer app."""
    app.command("proxy")(proxy_command)
