"""How an admitted call settles its reservation: recorded usage, else the estimate.

Every path that forwards a model request and records its answer (the gateway,
the SDK guards) settles the call through this one rule, whatever way the answer
ended:

- the provider's own end was read (a JSON body, ``message_stop``, ``[DONE]``,
  ``response.completed``) and every event could be read: the usage it reported,
  else the estimate (a complete answer without usage is never free);
- the provider refused before any content (an HTTP error status, an error event
  before the first content event): the usage it reported, else $0;
- the upstream could not be reached: $0;
- anything else — a stream the client closed and that could not be read to its
  end, one the upstream cut, one a timeout ended, a final event that could not
  be read (oversized, bad JSON): the larger of the usage received and the
  estimate. A cut never makes a call cheaper.

Usage that arrived but cannot be priced (malformed) is taken as the estimate.
"""

from dataclasses import dataclass

FIRST_ERROR_STATUS = 400


@dataclass(frozen=True, slots=True)
class CallEnd:
    """What is known about how an admitted call's answer ended."""

    status: int | None  # the upstream's HTTP status; None: it could not be reached
    finished: bool = False  # the provider's own end of an answer was read
    error: bool = False  # the provider reported an error (status or event)
    content_began: bool = False  # an event with content (or one not read) came
    unreadable: bool = False  # part of the answer could not be read
    has_usage: bool = False  # a usage object was received


@dataclass(frozen=True, slots=True)
class Settlement:
    """The record to seal: price the usage received (if ``by_usage``), never below ``floor``."""

    by_usage: bool
    floor_micros: int

    def amount(self, usage_micros: int | None) -> int | None:
        """The recorded micro-USD, given the usage's price (``None``: unpriced model)."""
        if not self.by_usage:
            return self.floor_micros
        if usage_micros is None:
            return None  # unpriced: recorded without an amount, so verdicts halt
        return max(usage_micros, self.floor_micros)


def settle(end: CallEnd, estimate_micros: int) -> Settlement:
    """The one settlement rule for an admitted call (see the module's docstring)."""
    if end.status is None:
        return Settlement(by_usage=False, floor_micros=0)
    refused = end.status >= FIRST_ERROR_STATUS or end.error
    if refused and not end.content_began:
        return Settlement(by_usage=end.has_usage, floor_micros=0)
    if end.finished and not end.unreadable:
        if end.has_usage:
            return Settlement(by_usage=True, floor_micros=0)
        return Settlement(by_usage=False, floor_micros=estimate_micros)
    return Settlement(by_usage=end.has_usage, floor_micros=estimate_micros)


def unreadable_usage(estimate_micros: int) -> Settlement:
    """Usage that arrived but cannot be priced: the estimate, an upper bound."""
    return Settlement(by_usage=False, floor_micros=estimate_micros)
