"""How many output tokens fit: the largest output limit a request may keep and still be admitted.

A request whose estimate (its input plus its whole output limit) does not fit
what is left under every applicable cap and budget can often still be served
with a lower output limit. The gate answers ``halt-100`` once a call would
reach 100 % of any cap, so an estimate fits a scope when it is strictly less
than the scope's room (cap − used − reserved). Pure: the gate calls it under
its lock with the figures it decides by, so what fits is what it admits.
"""

import math
from collections.abc import Iterable
from typing import NamedTuple

from ledger.core.prices import Quote, quote_estimate_micros
from ledger.core.spend import ScopeState


class OutputFit(NamedTuple):
    """A request whose output limit the gate may lower to what fits.

    ``requested`` and ``min_output`` count the whole answer's tokens; the
    limit found is a multiple of ``step`` (the number of choices, each getting
    the same limit). ``extra_micros`` is what the call may cost besides its
    tokens (server-side tool fees): lowering the output limit does not lower it.
    """

    input_tokens: int
    requested: int
    min_output: int
    quote: Quote
    step: int = 1
    extra_micros: int = 0


def room_micros(scope: ScopeState) -> int:
    """What is left under a scope's cap (negative when already over)."""
    return scope.cap_micros - scope.used_micros - scope.reserved_micros


def output_tokens_that_fit(rooms: Iterable[int], fit: OutputFit) -> int | None:
    """The largest output limit, at most ``fit.requested``, whose estimate fits every room.

    Returns ``None`` when not even ``fit.min_output`` tokens (or the requested
    limit, when smaller) fit; a request that fits as it is keeps its limit.
    """
    step = max(1, fit.step)
    floor = min(fit.requested, fit.min_output)
    smallest = min(rooms, default=None)
    if smallest is None:
        return fit.requested
    budget = smallest - 1  # the largest estimate that stays under 100 % of every cap
    if fit_estimate_micros(fit, fit.requested) <= budget:
        return fit.requested
    rates = fit.quote.rates_for(fit.input_tokens)
    spare = budget - fit.extra_micros - fit.input_tokens * rates.input
    if spare < 0:
        return None
    most = (
        fit.requested if rates.output == 0 else min(fit.requested, math.floor(spare / rates.output))
    )
    most -= most % step
    if most < floor or most < 1:
        return None
    # The estimate rounds up once over every kind; confirm the bound holds exactly.
    while most >= max(floor, 1) and fit_estimate_micros(fit, most) > budget:
        most -= step
    return most if most >= max(floor, 1) else None


def fit_estimate_micros(fit: OutputFit, output_tokens: int) -> int:
    """The estimate of ``fit``'s request sent with ``output_tokens`` of output, fees included."""
    micros, _rates = quote_estimate_micros(fit.input_tokens, output_tokens, fit.quote)
    return micros + fit.extra_micros
