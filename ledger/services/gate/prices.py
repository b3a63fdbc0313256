"""Price lookup with operator overrides, and syncing the price snapshot (SPEC §7).

A price is an operator override from ``ledger.toml``, else the rates the home's
price snapshot took from genai-prices. The snapshot is one small file per
provider, so a per-call command reads only the provider it prices and never
imports genai-prices. A model with neither is unpriced: never $0.
"""

import datetime as dt
import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ledger.core.cloud_models import CLOUD_PROVIDERS, price_candidates
from ledger.core.config import Config
from ledger.core.model_data import context_window, web_search_rate
from ledger.core.price_table import ProviderPrices, parse_provider_file, quote
from ledger.core.prices import PriceError, Quote
from ledger.core.server_tools import search_fee_micros
from ledger.errors import ChainIOError, UnknownPriceError
from ledger.services.chain.writer import Writer, WriterDeps

if TYPE_CHECKING:
    from collections.abc import Hashable


class PriceDeps(Protocol):
    """What a price lookup needs."""

    @property
    def config(self) -> Config:
        """The configuration (price overrides)."""
        ...

    def price_file(self, provider: str) -> bytes | None:
        """One provider's price snapshot file, or ``None`` when there is none."""
        ...


class SyncDeps(WriterDeps, PriceDeps, Protocol):
    """What syncing the snapshot needs."""

    def build_price_snapshot(self, now: dt.datetime) -> dict[str, bytes]:
        """The library's prices in effect at ``now``, one file per provider."""
        ...

    def write_price_files(self, files: dict[str, bytes]) -> str:
        """Replace the snapshot files; returns the folder's path."""
        ...


def model_context_window(deps: PriceDeps, provider: str, model: str) -> int | None:
    """The model's context window from the snapshot's model data, or ``None`` if unknown."""
    try:
        return context_window(_loader(deps, {}), provider, model)
    except PriceError:
        return None


def web_search_fee_micros(deps: PriceDeps, provider: str, model: str, searches: int) -> int:
    """The fee of ``searches`` web searches of ``model`` (its rate, else the default)."""
    if searches <= 0:
        return 0
    try:
        rate = web_search_rate(_loader(deps, {}), provider, model)
    except PriceError:
        rate = None
    return search_fee_micros(searches, rate)


# Quotes found before, by (provider, model, the overrides): matching a model
# against a provider's table is most of a lookup's cost, and a long-lived
# process (the gateway, the resident gate) prices the same few models again
# and again. Each quote keeps the snapshot files it was found in; it is used
# only while those files still hold exactly the same bytes.
_QUOTES: "OrderedDict[tuple[Hashable, ...], _Found]" = OrderedDict()
_QUOTES_KEPT = 256
_QUOTES_LOCK = threading.Lock()  # the gateway prices on its worker thread and its event loop


class _Found(NamedTuple):
    quote: Quote
    files: tuple[tuple[str, bytes | None], ...]


# Provider files parsed before, by their exact bytes: a long-lived process
# looks up a model's context window and fees on every call, and parsing the
# provider's file again each time was a measurable part of the gateway's cost.
# Keyed by the bytes themselves, so a changed snapshot is parsed afresh.
_PARSED: "OrderedDict[tuple[str, bytes], ProviderPrices]" = OrderedDict()
_PARSED_KEPT = 16


def _parsed(provider: str, raw: bytes) -> ProviderPrices:
    """``parse_provider_file``, once per provider file's bytes.

    Raises:
        PriceError: the file is malformed.
    """
    key = (provider, raw)
    with _QUOTES_LOCK:
        kept = _PARSED.get(key)
    if kept is not None:
        return kept
    parsed = parse_provider_file(raw, provider)
    with _QUOTES_LOCK:
        _PARSED[key] = parsed
        while len(_PARSED) > _PARSED_KEPT:
            _PARSED.popitem(last=False)
    return parsed


def _loader(deps: PriceDeps, read: dict[str, bytes | None]) -> Any:
    cache: dict[str, ProviderPrices | None] = {}

    def load(provider: str) -> ProviderPrices | None:
        if provider not in cache:
            raw = deps.price_file(provider)
            read[provider] = raw
            cache[provider] = None if raw is None else _parsed(provider, raw)
        return cache[provider]

    return load


def _cached_quote(deps: PriceDeps, provider: str, model: str) -> Quote | None:
    """The quote for ``provider/model``, found again only when its price source changed.

    Raises:
        PriceError: the snapshot is malformed.
        ChainIOError: a snapshot file cannot be read.
    """
    overrides = deps.config.price_overrides
    key = (provider, model, tuple(sorted(overrides.items())))
    with _QUOTES_LOCK:
        kept = _QUOTES.get(key)
    if kept is not None and all(deps.price_file(name) == raw for name, raw in kept.files):
        return kept.quote
    read: dict[str, bytes | None] = {}
    load = _loader(deps, read)
    found = quote(provider, model, overrides, load)
    for source, name in () if found is not None else price_candidates(provider, model):
        # A cloud's model (Bedrock, Vertex AI, Azure): that cloud's entries, else the vendor's.
        inner = quote(source, name, overrides, load)
        if inner is not None:
            found = inner._replace(provider=provider, model=model)
            break
    if found is not None:
        with _QUOTES_LOCK:
            _QUOTES[key] = _Found(found, tuple(read.items()))
            _QUOTES.move_to_end(key)
            while len(_QUOTES) > _QUOTES_KEPT:
                _QUOTES.popitem(last=False)
    return found


def find_price(deps: PriceDeps, provider: str, model: str) -> tuple[Quote | None, str]:
    """The quote for ``provider/model``, or ``None`` and why there is none.

    Never raises for a missing or unreadable snapshot: that is an unknown price.
    """
    try:
        found = _cached_quote(deps, provider, model)
    except (PriceError, ChainIOError) as exc:
        return None, f"the price snapshot cannot be used ({exc}); run `ledger prices sync`"
    if found is not None:
        return found, ""
    if provider in CLOUD_PROVIDERS:
        tried = ", ".join(f"{source}/{name}" for source, name in price_candidates(provider, model))
        why = f'none of {tried} is priced and no [prices."{provider}/{model}"] in ledger.toml'
    elif deps.price_file(provider) is None:
        why = (
            f"no price snapshot for provider {provider} in the home and no "
            f'[prices."{provider}/{model}"] in ledger.toml'
        )
    else:
        why = f'not in the price snapshot and no [prices."{provider}/{model}"] in ledger.toml'
    return None, why


def price_for(deps: PriceDeps, provider: str, model: str) -> Quote:
    """The quote for ``provider/model``.

    Raises:
        UnknownPriceError: the model has no price (exit 2); the message says
            ``no price for <provider>/<model>: …``.
    """
    found, why = find_price(deps, provider, model)
    if found is None:
        raise UnknownPriceError(f"no price for {provider}/{model}: {why}")
    return found


class SyncOutcome(NamedTuple):
    """What ``ledger prices sync`` wrote."""

    path: str
    source: str
    providers: int
    models: int
    sha256: str
    entry_hash: str | None


def snapshot_digest(files: dict[str, bytes]) -> str:
    """One SHA-256 over every snapshot file: each name, a NUL, its own SHA-256, a newline."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\n".encode())
    return digest.hexdigest()


def sync_prices(deps: SyncDeps, *, record: bool = True) -> SyncOutcome:
    """Write the price snapshot from the installed genai-prices.

    With ``record``, its digest is sealed in the chain (``ledger.prices_synced``).

    Raises:
        ChainIOError: a file or the chain cannot be written.
        LockTimeoutError: the chain lock stayed busy.
    """
    import json

    now = deps.clock.now()
    files = deps.build_price_snapshot(now)
    first = json.loads(next(iter(files.values()))) if files else {}
    source = str(first.get("source", "genai-prices"))
    models = sum(len(json.loads(raw)["models"]) for raw in files.values())
    path = deps.write_price_files(files)
    digest = snapshot_digest(files)
    entry_hash = None
    if record:
        payload = {
            "source": source,
            "taken_at": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "providers": len(files),
            "models": models,
            "sha256": digest,
        }
        writer = Writer(deps)
        with deps.chain.transaction() as tx:
            entry_hash = writer.append(tx, "ledger.prices_synced", payload).entry_hash
    return SyncOutcome(path, source, len(files), models, digest, entry_hash)


def init_prices(deps: SyncDeps) -> str | None:
    """``ledger init``: write the price snapshot when the home has none; returns its folder.

    An existing snapshot is kept (as ``init`` keeps an existing key and config).
    Nothing is sealed: ``init`` leaves the chain empty, and every priced
    envelope names its ``price_source`` and the rates it used.

    Raises:
        ChainIOError: a file cannot be written.
    """
    if any(deps.price_file(name) is not None for name in ("anthropic", "openai")):
        return None
    return deps.write_price_files(deps.build_price_snapshot(deps.clock.now()))
