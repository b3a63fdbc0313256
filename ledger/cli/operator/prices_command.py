"""``ledger prices show`` and ``ledger prices sync`` (SPEC §7)."""

from typing import TYPE_CHECKING, Annotated

import typer

from ledger.cli.operator.shared import exit_with as _exit
from ledger.cli.operator.shared import runtime as _runtime
from ledger.cli.output import guarded, print_error, print_json
from ledger.errors import EXIT_HALT

if TYPE_CHECKING:
    from ledger.core.prices import Rates

prices_app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Token prices: show a model's rates, or write the home's price snapshot from the "
        "installed genai-prices.\n\nExample: ledger prices show claude-sonnet-4-5 --provider "
        "anthropic"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _per_mtok(rates: "Rates") -> dict[str, str]:
    """Every token rate (text, audio, image, cache writes, ...) as ``<kind>_per_mtok``."""
    from ledger.core.prices import TOKEN_RATE_LABELS

    text = rates.as_text(frozenset(TOKEN_RATE_LABELS))
    return {f"{kind}_per_mtok": value for kind, value in text.items()}


@prices_app.command("show")
def show_command(
    model: Annotated[str, typer.Argument(help="The model name, e.g. claude-sonnet-4-5.")],
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help="The provider id (default: the first of anthropic, openai that prices it).",
        ),
    ] = None,
) -> None:
    """Print a model's four per-million-token rates and their source; exit 1 with no price.

    The rates are USD per million tokens: input, output, cache_read, cache_write
    (5-minute writes; cache_write_1h for one-hour writes), then every other token
    rate the model has (input_audio, output_audio, output_image, cache_audio_read,
    ...). The source is "config" for an override in ledger.toml, else
    "genai-prices <version>". "tiers" lists long-context prices: a call with
    more input tokens (cached ones included) than a tier's above_input_tokens
    pays that tier's rates for every token. "service_tiers" lists the rates of
    each service tier the model has its own prices for (priority, flex).

    Example: ledger prices show claude-opus-4-1 --provider anthropic
    """

    def body() -> int:
        from ledger.errors import UnknownPriceError
        from ledger.services.gate.call_args import provider_id, text_arg
        from ledger.services.gate.calls import INFERRED_PROVIDERS
        from ledger.services.gate.prices import find_price

        runtime = _runtime()
        name = provider_id(provider)
        checked = text_arg(model, "MODEL") or ""
        for candidate in (name,) if name else INFERRED_PROVIDERS:
            found, why = find_price(runtime, candidate, checked)
            if found is not None:
                print_json(
                    {
                        "provider": found.provider,
                        "model": found.model,
                        **_per_mtok(found.rates),
                        "price_source": found.source,
                        "tiers": [
                            {"above_input_tokens": tier.above, **_per_mtok(tier.rates)}
                            for tier in found.tiers
                        ],
                        "service_tiers": {
                            dict(variant.when)["service_tier"]: {
                                **_per_mtok(variant.rates),
                                "tiers": [
                                    {"above_input_tokens": tier.above, **_per_mtok(tier.rates)}
                                    for tier in variant.tiers
                                ],
                            }
                            for variant in found.variants
                            if dict(variant.when).keys() == {"service_tier"}
                        },
                    }
                )
                return 0
        where = f"{name}/{checked}: {why}" if name else f"{checked}: not priced for any provider"
        print_error(str(UnknownPriceError(f"no price for {where}")))
        return EXIT_HALT

    _exit(guarded(body))


@prices_app.command("sync")
def sync_command() -> None:
    """Write the price snapshot from the installed genai-prices and seal its digest.

    Nothing is fetched over the network: the rates are the ones the installed
    genai-prices package ships (upgrade it to get newer prices). Each provider's
    rates go to prices/<provider>.json in the home; a ledger.prices_synced
    envelope records the snapshot's SHA-256 digest.

    Example: ledger --home ./.ledger prices sync
    """

    def body() -> int:
        from ledger.services.gate.prices import sync_prices

        outcome = sync_prices(_runtime())
        print_json(
            {
                "path": outcome.path,
                "price_source": outcome.source,
                "providers": outcome.providers,
                "models": outcome.models,
                "sha256": outcome.sha256,
                "entry_hash": outcome.entry_hash,
            }
        )
        return 0

    _exit(guarded(body))


def register(app: typer.Typer) -> None:
    """Add ``ledger prices``."""
    app.add_typer(prices_app, name="prices")
