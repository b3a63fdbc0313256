"""Which providers a home knows, so a mistyped provider cannot walk around its cap.

A provider is known when ``usd.provider_caps`` caps it, ``usd.providers`` lists
it, ``[proxy.providers.<name>]`` serves it, or the price table prices it (the
home's genai-prices snapshot, or a ``[prices."<provider>/<model>"]`` override);
``aggregate`` means all providers.
A verdict naming any other provider is a bad command line; a record naming one
is still sealed (spend is never refused), with a warning.
"""

from typing import Protocol

from ledger.core.cloud_models import CLOUD_PROVIDERS
from ledger.core.config import AGGREGATE, Config
from ledger.errors import UnknownProviderError


class ProviderDeps(Protocol):
    """What telling known providers needs: the config and the price snapshot."""

    @property
    def config(self) -> Config:
        """The configuration (caps, ``usd.providers``, price overrides)."""
        ...

    def has_price_file(self, provider: str) -> bool:
        """Whether the home's price snapshot has a file for ``provider``."""
        ...

    def price_providers(self) -> tuple[str, ...]:
        """The providers the home's price snapshot has a file for."""
        ...

    def library_providers(self) -> tuple[str, ...]:
        """The providers the price library knows (a home may have no snapshot)."""
        ...


def _configured(config: Config) -> set[str]:
    # The clouds the gateway serves: priced from the price table's entries for them.
    known = {AGGREGATE, *CLOUD_PROVIDERS, *config.provider_caps_micros, *config.expected_providers}
    known.update(config.proxy.providers)  # the gateway's OpenAI-compatible providers
    known.update(key.partition("/")[0] for key in config.price_overrides)
    return known


def unknown_provider(deps: ProviderDeps, provider: str) -> str | None:
    """Why ``provider`` is unknown to this home, naming the nearest known id; ``None`` if known.

    A known provider costs at most one stat (the verdict path); only an unknown
    one lists the snapshot and the price library, to suggest the nearest id.
    """
    configured = _configured(deps.config)
    if provider in configured or deps.has_price_file(provider):
        return None
    snapshot = deps.price_providers()
    library = deps.library_providers()
    if provider in library:
        return None
    import difflib  # only a refused provider needs it

    candidates = sorted((configured | set(snapshot) | set(library)) - {AGGREGATE})
    nearest = difflib.get_close_matches(provider, candidates, n=1, cutoff=0.0)
    hint = f"; did you mean {nearest[0]}?" if nearest else ""
    return (
        f"{provider} is not a provider this home knows (none of usd.provider_caps, "
        f"usd.providers or the price table names it){hint}"
    )


def require_known_provider(deps: ProviderDeps, provider: str | None) -> None:
    """Refuse a verdict for a provider this home does not know.

    Raises:
        UnknownProviderError: ``provider`` is unknown (exit 2); the message
            suggests the nearest known id.
    """
    if provider is None:
        return
    problem = unknown_provider(deps, provider)
    if problem is not None:
        raise UnknownProviderError(f"--provider: {problem}")
