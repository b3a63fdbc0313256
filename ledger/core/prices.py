"""Token prices and exact call costs (SPEC §7), as pure functions.

Rates are USD per million tokens, held as exact fractions of the decimal text
they were written in. Since a rate is USD per 10^6 tokens and a cost is
counted in micro-USD (10^-6 USD), ``count × rate`` *is* micro-USD: no scaling,
no float. A call's cost is the exact sum over token kinds, rounded up once at
the end (an estimate or a charge never comes out smaller than the price).

The price snapshot (``prices/<provider>.json`` in the home) is data, parsed
here: per provider, the models with genai-prices' own match rules (equals, starts_with,
ends_with, contains, regex, and, or), their base rates as decimal text, and
their long-context tiers.

**Tiers.** Some models cost more per token once a request's input passes a
size (above 200k input tokens, say). As genai-prices models it, the tier is
chosen by the call's *total* input tokens (uncached, cache writes and cache
reads together) and its rates then apply to *every* token of the call, of
every kind — a cliff, not a marginal rate. An estimate is priced at the tier
its input estimate reaches, a record at the tier its usage reached.
"""

import json
import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any, NamedTuple

# Format 2 added long-context tiers: a format-1 file lacks them and would price a
# long request at its base rate, so it is refused (``ledger prices sync`` rewrites it).
SNAPSHOT_FORMAT = "ledger-prices/2"
CONFIG_SOURCE = "config"
RATE_KINDS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
_MAX_DEPTH = 32


class PriceError(ValueError):
    """A price that cannot be used: unknown model, malformed snapshot or rate."""


class Rates(NamedTuple):
    """USD per million tokens for each kind of token a call is billed for."""

    input: Fraction
    output: Fraction
    cache_read: Fraction
    cache_write: Fraction  # a 5-minute (the default) cache write
    cache_write_1h: Fraction

    def as_text(self) -> dict[str, str]:
        """The rates as exact decimal text (for envelopes and ``prices show``)."""
        return {kind: fraction_text(getattr(self, kind)) for kind in RATE_KINDS}


class Tier(NamedTuple):
    """The rates of every token of a call whose total input tokens exceed ``above``."""

    above: int
    rates: Rates


class Quote(NamedTuple):
    """The rates for one model and where they came from (``price_source``).

    ``rates`` are the base rates; ``tiers`` (ascending by ``above``) replace
    them for calls with more input tokens.
    """

    provider: str
    model: str
    rates: Rates
    source: str
    tiers: tuple[Tier, ...] = ()

    def rates_for(self, total_input_tokens: int) -> Rates:
        """The rates of a call with ``total_input_tokens`` input tokens of all kinds."""
        for tier in reversed(self.tiers):
            if total_input_tokens > tier.above:
                return tier.rates
        return self.rates


class TokenCounts(NamedTuple):
    """Token counts by kind, each priced once at its own rate.

    ``reasoning`` is part of ``output`` (kept for the record, never priced again).
    """

    input: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int = 0

    def as_payload(self) -> dict[str, int]:
        """The counts as a payload object."""
        return dict(self._asdict())

    @property
    def total_input(self) -> int:
        """Every input token, cached or not: what chooses a long-context tier."""
        return self.input + self.cache_write_5m + self.cache_write_1h + self.cache_read


def fraction_text(value: Fraction) -> str:
    """A rate as the shortest exact decimal text (rates are finite decimals)."""
    if value.denominator == 1:
        return str(value.numerator)
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        raise PriceError(f"rate {value} is not a finite decimal")
    places = max(twos, fives)
    scaled = value * 10**places
    digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
    sign = "-" if scaled < 0 else ""
    text = f"{sign}{digits[:-places]}.{digits[-places:]}".rstrip("0")
    return text.rstrip(".")


def parse_rate(value: Any, name: str) -> Fraction:
    """A rate from a number or decimal text: finite and ≥ 0.

    Raises:
        PriceError: not a number, not finite, or negative.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PriceError(f"{name}: must be a number")
    text = str(value).strip()
    if not re.fullmatch(r"\d{1,15}(\.\d{1,15})?([eE][+-]?\d{1,3})?", text):
        raise PriceError(f"{name}: must be a number ≥ 0, got {value!r}")
    return Fraction(text)


def rates_from(table: dict[str, Any], prefix: str = "", suffix: str = "") -> Rates:
    """Rates from a table of ``<kind><suffix>`` keys; cache rates default as SPEC §7 says.

    ``cache_read`` and ``cache_write`` default to the input rate, and
    ``cache_write_1h`` to ``cache_write``.

    Raises:
        PriceError: ``input`` or ``output`` missing, or a malformed rate.
    """

    def rate(kind: str) -> Fraction | None:
        key = f"{kind}{suffix}"
        return parse_rate(table[key], f"{prefix}{key}") if table.get(key) is not None else None

    found = {kind: rate(kind) for kind in RATE_KINDS}
    for kind in ("input", "output"):
        if found[kind] is None:
            raise PriceError(f"{prefix}{kind}{suffix}: required")
    base_input = found["input"]
    assert base_input is not None  # noqa: S101 - checked above
    cache_write = found["cache_write"] if found["cache_write"] is not None else base_input
    return Rates(
        input=base_input,
        output=found["output"] or Fraction(0),
        cache_read=found["cache_read"] if found["cache_read"] is not None else base_input,
        cache_write=cache_write,
        cache_write_1h=found["cache_write_1h"]
        if found["cache_write_1h"] is not None
        else cache_write,
    )


def quote_cost_micros(tokens: TokenCounts, found: Quote) -> tuple[int, Rates]:
    """The exact cost of ``tokens`` at the tier they reach, and the rates applied."""
    rates = found.rates_for(tokens.total_input)
    return cost_micros(tokens, rates), rates


def quote_estimate_micros(
    input_tokens: int, max_output_tokens: int, found: Quote
) -> tuple[int, Rates]:
    """The upper-bound estimate at the tier ``input_tokens`` reach, and the rates applied."""
    rates = found.rates_for(input_tokens)
    return estimate_micros(input_tokens, max_output_tokens, rates), rates


def cost_micros(tokens: TokenCounts, rates: Rates) -> int:
    """The exact cost of ``tokens`` at ``rates`` in micro-USD, rounded up once."""
    # Exact (Fraction) arithmetic, on the kinds a call has: a product or sum of
    # Fractions costs a gcd, and most calls have two kinds of five.
    exact: Fraction | int = 0
    for count, rate in (
        (tokens.input, rates.input),
        (tokens.cache_write_5m, rates.cache_write),
        (tokens.cache_write_1h, rates.cache_write_1h),
        (tokens.cache_read, rates.cache_read),
        (tokens.output, rates.output),
    ):
        if count:
            exact += count * rate
    return math.ceil(exact)


def estimate_micros(input_tokens: int, max_output_tokens: int, rates: Rates) -> int:
    """The upper-bound estimate of a call: N input tokens and at most K output tokens."""
    return cost_micros(TokenCounts(input=input_tokens, output=max_output_tokens), rates)


def match(clause: Any, text: str, depth: int = 0) -> bool:
    """Whether a genai-prices match clause accepts ``text`` (a lower-cased model name).

    Raises:
        PriceError: a clause this format does not know.
    """
    if depth > _MAX_DEPTH or not isinstance(clause, dict) or len(clause) != 1:
        raise PriceError("malformed match clause")
    ((kind, value),) = clause.items()
    if kind in {"or", "and"}:
        if not isinstance(value, list):
            raise PriceError("malformed match clause")
        results = (match(inner, text, depth + 1) for inner in value)
        return any(results) if kind == "or" else all(results)
    if not isinstance(value, str):
        raise PriceError("malformed match clause")
    if kind == "equals":
        return text == value.lower()
    if kind == "starts_with":
        return text.startswith(value.lower())
    if kind == "ends_with":
        return text.endswith(value.lower())
    if kind == "contains":
        return value.lower() in text
    if kind == "regex":
        return re.search(value, text) is not None
    raise PriceError(f"unknown match clause {kind!r}")


class ProviderPrices(NamedTuple):
    """One provider's part of the price snapshot: models in match order, fallbacks."""

    source: str
    fallback: tuple[str, ...]
    models: list[Any]


ProviderLoader = Callable[[str], "ProviderPrices | None"]


def parse_provider_file(raw: bytes, provider: str) -> ProviderPrices:
    """Parse one provider's file of the price snapshot (``prices/<provider>.json``).

    Raises:
        PriceError: not a price snapshot file of this format, or another provider's.
    """
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PriceError(f"price snapshot for {provider} is not JSON ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
        raise PriceError(f"price snapshot for {provider} is not in format {SNAPSHOT_FORMAT}")
    source, models = document.get("source"), document.get("models")
    fallback = document.get("fallback") or []
    if (
        document.get("provider") != provider
        or not isinstance(source, str)
        or not isinstance(models, list)
        or not isinstance(fallback, list)
        or not all(isinstance(name, str) for name in fallback)
    ):
        raise PriceError(f"price snapshot for {provider} is malformed")
    return ProviderPrices(source, tuple(fallback), models)


def find_model_entry(
    load: ProviderLoader, provider: str, model: str
) -> tuple[dict[str, Any], str] | None:
    """The snapshot's entry for ``model`` and its source, or ``None``.

    The provider's own models are tried first, in the library's order, then the
    providers it falls back to (one step), as genai-prices does.

    Raises:
        PriceError: the snapshot's file for a provider is malformed.
    """
    text = model.lower()
    own = load(provider)
    if own is None:
        return None
    found, source = _match_models(own.models, text), own.source
    if found is None:
        for other in own.fallback:
            inner = load(other)
            if inner is not None:
                found, source = _match_models(inner.models, text), inner.source
                if found is not None:
                    break
    return None if found is None else (found, source)


def find_model(
    load: ProviderLoader, provider: str, model: str
) -> tuple[str, Rates, str, tuple[Tier, ...]] | None:
    """The library's model id, base rates, source and tiers for ``model``, or ``None``.

    Raises:
        PriceError: the snapshot's file for a provider is malformed.
    """
    entry = find_model_entry(load, provider, model)
    if entry is None:
        return None
    found, source = entry
    model_id = str(found["id"])
    rates = found.get("rates")
    if not isinstance(rates, dict):
        raise PriceError(f"price snapshot: {provider}/{model_id} has no rates")
    prefix = f"{provider}/{model_id}."
    return model_id, rates_from(rates, prefix=prefix), source, _tiers(found, prefix)


def _tiers(model: dict[str, Any], prefix: str) -> tuple[Tier, ...]:
    """A model's tiers: each with a threshold and a full set of rates, ascending.

    Raises:
        PriceError: a malformed tier.
    """
    raw = model.get("tiers") or []
    if not isinstance(raw, list):
        raise PriceError(f"{prefix}tiers: must be a list")
    tiers: list[Tier] = []
    for index, tier in enumerate(raw):
        where = f"{prefix}tiers[{index}]."
        above = tier.get("above") if isinstance(tier, dict) else None
        if isinstance(above, bool) or not isinstance(above, int) or above < 0:
            raise PriceError(f"{where}above: must be an integer ≥ 0")
        if tiers and above <= tiers[-1].above:
            raise PriceError(f"{where}above: tiers must ascend")
        rates = tier.get("rates")
        if not isinstance(rates, dict):
            raise PriceError(f"{where}rates: must be an object")
        tiers.append(Tier(above, rates_from(rates, prefix=where)))
    return tuple(tiers)


def _match_models(models: list[Any], text: str) -> dict[str, Any] | None:
    for candidate in models:
        if isinstance(candidate, dict) and match(candidate.get("match"), text):
            return candidate
    return None


def quote(
    provider: str,
    model: str,
    overrides: dict[str, Rates],
    load: ProviderLoader,
) -> Quote | None:
    """The rates for ``provider/model``: an operator override wins over the library.

    An override applies to the exact model name, or to the library's model id
    the name matches (so ``claude-opus-4-1`` also prices ``claude-opus-4-1-20250805``).

    Raises:
        PriceError: the snapshot is malformed.
    """
    own = overrides.get(f"{provider}/{model}")
    if own is not None:
        return Quote(provider, model, own, CONFIG_SOURCE)
    found = find_model(load, provider, model)
    if found is None:
        return None
    model_id, rates, source, tiers = found
    by_id = overrides.get(f"{provider}/{model_id}")
    if by_id is not None:
        return Quote(provider, model, by_id, CONFIG_SOURCE)  # an override is one flat price
    return Quote(provider, model, rates, source, tiers)
