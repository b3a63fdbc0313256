"""Token prices and exact call costs (SPEC §7), as pure functions.

Rates are USD per million tokens, held as exact fractions of the decimal text
they were written in. Since a rate is USD per 10^6 tokens and a cost is
counted in micro-USD (10^-6 USD), ``count × rate`` *is* micro-USD: no scaling,
no float. A call's cost is the exact sum over token kinds, rounded up once at
the end (an estimate or a charge never comes out smaller than the price).

The price snapshot (``prices/<provider>.json`` in the home) is data, read by
``ledger.core.price_table``: per provider, the models with genai-prices' own
match rules, their rates as decimal text, their long-context tiers and their
prices for request contexts.

**Tiers.** Some models cost more per token once a request's input passes a
size (above 200k input tokens, say). As genai-prices models it, the tier is
chosen by the call's *total* input tokens (uncached, cache writes and cache
reads together) and its rates then apply to *every* token of the call, of
every kind — a cliff, not a marginal rate. An estimate is priced at the tier
its input estimate reaches, a record at the tier its usage reached.

**Modalities.** A call's tokens are counted by kind and by modality (audio,
image and video input and output, cached audio and images), each a part of
the whole it belongs to. Each part is priced at the most specific rate the
model has for it, as genai-prices resolves a price: cached audio at the
cached-audio rate, else the cache-read or audio-input rate, else the input
rate; audio output at the audio-output rate, else the output rate. A rate a
model lacks is never $0: the part falls back to the rate of the whole.

**Service tiers.** A model's prices for a request context (OpenAI
``service_tier`` ``priority`` / ``flex``, batch processing) are its
``variants``: a call of that tier is priced at the variant's rates. A tier the
model has no price for is *unknown* (``Quote.for_service_tier`` answers
``None``): the estimate takes the dearest of every set of rates the model has.
"""

import math
from fractions import Fraction
from typing import NamedTuple

# Format 2 added long-context tiers, format 3 every modality's rate and the
# service tiers: an older file lacks them and would price an audio answer or a
# priority call as standard text, so it is refused (``ledger prices sync`` rewrites it).
SNAPSHOT_FORMAT = "ledger-prices/3"
CONFIG_SOURCE = "config"
RATE_KINDS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")

# What each token rate is for, as genai-prices' units say (direction, modality,
# token type, cache lifetime): a part of a call is priced at the rate whose
# labels are the most of its own (``tests/unit/core/test_price_units.py`` holds
# this table against the library's).
_IN, _OUT = "input", "output"
TOKEN_RATE_LABELS: dict[str, frozenset[str]] = {
    "input": frozenset({_IN}),
    "output": frozenset({_OUT}),
    "cache_read": frozenset({_IN, "cache_read"}),
    "cache_write": frozenset({_IN, "cache_write"}),
    "cache_write_5m": frozenset({_IN, "cache_write", "5m"}),
    "cache_write_1h": frozenset({_IN, "cache_write", "1h"}),
    **{
        f"{direction}_{modality}": frozenset({direction, modality})
        for direction in (_IN, _OUT)
        for modality in ("text", "audio", "image", "video")
    },
    **{
        f"cache_{modality}_read": frozenset({_IN, modality, "cache_read"})
        for modality in ("text", "audio", "image", "video")
    },
    **{
        f"cache_{modality}_write{ttl}": frozenset(
            {_IN, modality, "cache_write", *([ttl[1:]] if ttl else [])}
        )
        for modality in ("text", "audio", "image", "video")
        for ttl in ("", "_5m", "_1h")
    },
    "input_tool": frozenset({_IN, "tool"}),
    **{
        f"input_{modality}_tool": frozenset({_IN, modality, "tool"})
        for modality in ("text", "audio", "image", "video")
    },
    "output_reasoning": frozenset({_OUT, "reasoning"}),
    "output_citation": frozenset({_OUT, "citation"}),
    **{
        f"output_{modality}_{kind}": frozenset({_OUT, modality, kind})
        for modality in ("text", "audio", "image", "video")
        for kind in ("reasoning", "citation")
    },
}
# Kinds whose rates apply to a request, not to its tokens: per 1,000 requests.
REQUEST_RATE = "requests_kcount"


class PriceError(ValueError):
    """A price that cannot be used: unknown model, malformed snapshot or rate."""


class Rates(NamedTuple):
    """USD per million tokens for each kind of token a call is billed for.

    ``extra`` holds every other rate the model has, by kind (``output_audio``,
    ``input_image``, ``cache_audio_read``, ..., and rates of other units such
    as ``requests_kcount``), so none the library ships is lost.
    """

    input: Fraction
    output: Fraction
    cache_read: Fraction
    cache_write: Fraction  # a 5-minute (the default) cache write
    cache_write_1h: Fraction
    extra: tuple[tuple[str, Fraction], ...] = ()

    def as_text(self, kinds: frozenset[str] | None = None) -> dict[str, str]:
        """The rates as exact decimal text (for envelopes and ``prices show``).

        The five base rates always; of the others, those in ``kinds`` (all when None).
        """
        text = {kind: fraction_text(getattr(self, kind)) for kind in RATE_KINDS}
        for kind, rate in self.extra:
            if kinds is None or kind in kinds:
                text[kind] = fraction_text(rate)
        return text

    def rate_of(self, kind: str) -> Fraction | None:
        """The rate of ``kind``, or ``None`` when the model has none of its own."""
        if kind in RATE_KINDS:
            found: Fraction = getattr(self, kind)
            return found
        return next((rate for name, rate in self.extra if name == kind), None)

    def for_labels(self, labels: frozenset[str]) -> tuple[str, Fraction]:
        """The rate for tokens of ``labels``: the most specific the model has, the dearest of a tie.

        Every part has at least its direction's rate (``input``, ``output``).
        """
        best: tuple[int, Fraction, str] | None = None
        for kind, kind_labels in TOKEN_RATE_LABELS.items():
            if not kind_labels <= labels:
                continue
            rate = self.rate_of(kind)
            if rate is None:
                continue
            candidate = (len(kind_labels), rate, kind)
            if best is None or candidate[:2] > best[:2]:
                best = candidate
        assert best is not None  # noqa: S101 - input and output are always priced
        return best[2], best[1]


class Tier(NamedTuple):
    """The rates of every token of a call whose total input tokens exceed ``above``."""

    above: int
    rates: Rates


class Variant(NamedTuple):
    """A model's rates for one request context (``(("service_tier", "priority"),)``)."""

    when: tuple[tuple[str, str], ...]
    rates: Rates
    tiers: tuple[Tier, ...] = ()


# Service tiers that are the standard prices (OpenAI ``auto``/``default``,
# Anthropic ``standard``/``standard_only``).
STANDARD_TIERS = frozenset({"auto", "default", "standard", "standard_only"})


class Quote(NamedTuple):
    """The rates for one model and where they came from (``price_source``).

    ``rates`` are the base rates; ``tiers`` (ascending by ``above``) replace
    them for calls with more input tokens; ``variants`` are the prices of a
    request context (a service tier, batch processing).
    """

    provider: str
    model: str
    rates: Rates
    source: str
    tiers: tuple[Tier, ...] = ()
    variants: tuple[Variant, ...] = ()

    def rates_for(self, total_input_tokens: int) -> Rates:
        """The rates of a call with ``total_input_tokens`` input tokens of all kinds."""
        for tier in reversed(self.tiers):
            if total_input_tokens > tier.above:
                return tier.rates
        return self.rates

    def for_service_tier(self, service_tier: str | None) -> "Quote | None":
        """This model's quote for a call of ``service_tier``; ``None``: a tier it has no price for.

        No tier, or a standard one, is the base quote.
        """
        if service_tier is None or service_tier in STANDARD_TIERS:
            return self
        wanted = (("service_tier", service_tier),)
        for variant in self.variants:
            if variant.when == wanted:
                return self._replace(rates=variant.rates, tiers=variant.tiers, variants=())
        return None

    def every_tier(self) -> "tuple[Quote, ...]":
        """The base quote and one per service tier the model has (for an unknown tier)."""
        found = [self._replace(variants=())]
        found.extend(
            self._replace(rates=variant.rates, tiers=variant.tiers, variants=())
            for variant in self.variants
            if variant.when and variant.when[0][0] == "service_tier"
        )
        return tuple(found)


class TokenCounts(NamedTuple):
    """Token counts by kind, each priced once at its own rate.

    ``reasoning`` is part of ``output`` (kept for the record, never priced again).
    The modality counts are parts too: ``input_audio``, ``input_image`` and
    ``input_video`` of ``input`` (uncached input), ``cache_audio_read`` and
    ``cache_image_read`` of ``cache_read``, ``output_audio`` and ``output_image``
    of ``output``.
    """

    input: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int = 0
    input_audio: int = 0
    input_image: int = 0
    input_video: int = 0
    cache_audio_read: int = 0
    cache_image_read: int = 0
    output_audio: int = 0
    output_image: int = 0

    def as_payload(self) -> dict[str, int]:
        """The counts as a payload object (modality counts only when there are any)."""
        counts = self._asdict()
        return {kind: n for kind, n in counts.items() if n or kind in _PAYLOAD_ALWAYS}

    @property
    def total_input(self) -> int:
        """Every input token, cached or not: what chooses a long-context tier."""
        return self.input + self.cache_write_5m + self.cache_write_1h + self.cache_read

    def parts(self) -> list[tuple[int, frozenset[str]]]:
        """Each disjoint part of the call: its count and what it is (for its rate)."""
        text_in = self.input - self.input_audio - self.input_image - self.input_video
        text_cached = self.cache_read - self.cache_audio_read - self.cache_image_read
        text_out = self.output - self.output_audio - self.output_image
        return [
            (text_in, frozenset({_IN, "text"})),
            (self.input_audio, frozenset({_IN, "audio"})),
            (self.input_image, frozenset({_IN, "image"})),
            (self.input_video, frozenset({_IN, "video"})),
            (text_cached, frozenset({_IN, "text", "cache_read"})),
            (self.cache_audio_read, frozenset({_IN, "audio", "cache_read"})),
            (self.cache_image_read, frozenset({_IN, "image", "cache_read"})),
            (self.cache_write_5m, frozenset({_IN, "text", "cache_write", "5m"})),
            (self.cache_write_1h, frozenset({_IN, "text", "cache_write", "1h"})),
            (text_out, frozenset({_OUT, "text"})),
            (self.output_audio, frozenset({_OUT, "audio"})),
            (self.output_image, frozenset({_OUT, "image"})),
        ]


_PAYLOAD_ALWAYS = frozenset(
    {"input", "cache_write_5m", "cache_write_1h", "cache_read", "output", "reasoning"}
)


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


def quote_cost_micros(tokens: TokenCounts, found: Quote) -> tuple[int, Rates]:
    """The exact cost of ``tokens`` at the tier they reach, and the rates applied."""
    rates = found.rates_for(tokens.total_input)
    return cost_micros(tokens, rates), rates


def quote_estimate_micros(
    input_tokens: int,
    max_output_tokens: int,
    found: Quote,
    *,
    input_labels: frozenset[str] = frozenset(),
    output_labels: frozenset[str] = frozenset(),
) -> tuple[int, Rates]:
    """The upper-bound estimate at the tier ``input_tokens`` reach, and the rates applied.

    ``input_labels`` / ``output_labels`` are the modalities the request may send
    or ask for beside text (``audio``, ``image``): every token of that side is
    priced at the dearest of their rates.
    """
    rates = found.rates_for(input_tokens)
    exact = input_tokens * dearest_rate(rates, _IN, input_labels)
    exact += max_output_tokens * dearest_rate(rates, _OUT, output_labels)
    return math.ceil(exact), rates


def dearest_rate(rates: Rates, direction: str, modalities: frozenset[str]) -> Fraction:
    """The dearest rate of text and of each of ``modalities`` on one side of a call."""
    return max(
        rates.for_labels(frozenset({direction, modality}))[1] for modality in {"text", *modalities}
    )


def cost_micros(tokens: TokenCounts, rates: Rates) -> int:
    """The exact cost of ``tokens`` at ``rates`` in micro-USD, rounded up once.

    Each part is priced at the most specific rate the model has for it.
    """
    exact: Fraction | int = 0
    for count, labels in tokens.parts():
        if count:
            exact += count * rates.for_labels(labels)[1]
    per_request = rates.rate_of(REQUEST_RATE)
    if per_request:
        # A fee per 1,000 requests (Perplexity's): this call is one.
        exact += per_request * 1_000_000 / 1_000
    return math.ceil(exact)


def applied_kinds(tokens: TokenCounts, rates: Rates) -> frozenset[str]:
    """The kinds of rate ``tokens`` were priced at (for the record's ``rates``)."""
    return frozenset(rates.for_labels(labels)[0] for count, labels in tokens.parts() if count)


def estimate_micros(input_tokens: int, max_output_tokens: int, rates: Rates) -> int:
    """The upper-bound estimate of a call: N input tokens and at most K output tokens."""
    return cost_micros(TokenCounts(input=input_tokens, output=max_output_tokens), rates)
