"""The gate's answers as typed values: the four verdicts and the five uncertainty modes.

A small module of its own so that code which only reads a verdict (the hook
answers, the halt sentence, the Python API) imports the kinds without the
gate's configuration. ``Verdict`` is a ``str`` enum: the JSON and the command
line print its text unchanged.
"""

from enum import StrEnum


class Verdict(StrEnum):
    """The gate's four answers."""

    ALLOW = "allow"
    WARN_90 = "warn-90"
    HALT_100 = "halt-100"
    HALT_UNCERTAINTY = "halt-uncertainty"

    @classmethod
    def named(cls, text: object) -> "Verdict | None":
        """The verdict ``text`` spells, or ``None`` for any other value."""
        return _VERDICTS.get(text) if isinstance(text, str) else None

    @classmethod
    def read(cls, text: object) -> "Verdict":
        """The verdict a document names, read once where the document comes in.

        Any other value (missing, misspelt, from a newer release) reads as
        ``halt-uncertainty``: an answer that cannot be read never admits a call.
        """
        return cls.named(text) or Verdict.HALT_UNCERTAINTY

    @property
    def admits(self) -> bool:
        """Whether the call may proceed."""
        return self in {Verdict.ALLOW, Verdict.WARN_90}

    @property
    def halts(self) -> bool:
        """Whether the call is refused: ``halt-100`` or ``halt-uncertainty``."""
        return not self.admits

    @property
    def event_type(self) -> str:
        """The chain event that records this verdict."""
        return "budget." + self.value.replace("-", "_")


_VERDICTS = {verdict.value: verdict for verdict in Verdict}


class Uncertainty(StrEnum):
    """The five uncertainty modes, in the order the gate checks them."""

    COUNTER_INCONSISTENT = "counter_inconsistent"
    COUNTER_DRIFT = "counter_drift"
    BILLING_STALE = "billing_stale"
    PROVIDER_LAG = "provider_lag"
    CLOCK_DRIFT = "clock_drift"
