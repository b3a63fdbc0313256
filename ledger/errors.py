"""Every error the product reports, each with the exit code SPEC §3 gives it.

A ``LedgerError`` reaching the command line becomes one ``ledger: <message>``
line on stderr and its ``exit_code``. Halts are not errors: a halt is a
decision value, and only malformed input or failed I/O raise.
"""

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import datetime as dt

EXIT_OK = 0
EXIT_HALT = 1
EXIT_USAGE = 2
EXIT_DATA = 65
EXIT_IO = 74
EXIT_TEMPFAIL = 75
EXIT_CONFIG = 78


class LedgerError(Exception):
    """Base of every error the product raises on purpose."""

    exit_code: ClassVar[int] = EXIT_HALT


class UsageError(LedgerError):
    """The command line is wrong: an unknown option, a negative amount, a bad id."""

    exit_code = EXIT_USAGE


class ConfigError(LedgerError):
    """``ledger.toml`` or a ``LEDGER_*`` variable is malformed or out of range."""

    exit_code = EXIT_CONFIG


class NoHomeError(ConfigError):
    """The home a command would run on does not exist: it was never initialized."""

    def __init__(self, home: object) -> None:
        super().__init__(f"no ledger home at {home}: run `ledger init`")


class NotAHomeError(ConfigError):
    """The home a command would run on is a directory ``ledger init`` never made a home.

    Running there would write a chain, keys and state into someone's folder,
    or answer from an empty counter as if all were well.
    """

    def __init__(self, home: object) -> None:
        super().__init__(f"{home} is not a ledger home: run `ledger init`")


class ClockRangeError(ConfigError):
    """The clock (``LEDGER_NOW``) is outside the times the chain can hold.

    ``verdict`` turns it into its printed, unrecorded halt (SPEC §3); every
    other command reports it as a configuration error.
    """

    def __init__(self, message: str, moment: "dt.datetime") -> None:
        super().__init__(message)
        self.moment = moment


class InputDataError(LedgerError):
    """A file the user pointed at cannot be read or parsed (key, trust store, checkpoint)."""

    exit_code = EXIT_DATA


class KeyFileError(InputDataError):
    """A key file is missing, unreadable, malformed or too widely readable."""


class ChainIOError(LedgerError):
    """Reading or writing the chain failed at the operating-system level."""

    exit_code = EXIT_IO


class AddressInUseError(ChainIOError):
    """A port the daemon or the gateway must listen on is held by another process.

    Exit 75, not 74: nothing is wrong with this process or its home; it may
    start once the other one has gone. Never retried in a loop.
    """

    exit_code = EXIT_TEMPFAIL


class TornTailError(ChainIOError):
    """The chain's last line is incomplete; nothing may be appended after it."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path} ends in a torn line (a write was cut short); "
            "run `ledger recover` before appending"
        )


class StoreUnreachableError(ChainIOError):
    """The database store cannot be reached, or dropped the connection mid-transaction.

    Verdicts halt on it; ``record`` spools its spend in the home (SPEC §8).
    """


class GatewayUnreachableError(ChainIOError):
    """The gateway a home-less (laptop) set-up asks for its figures did not answer usably.

    The hooks and ``statusline`` then fail closed: the session is refused, never waved on.
    """


class LockTimeoutError(LedgerError):
    """The chain lock could not be taken within ``chain.lock_timeout_seconds``."""

    exit_code = EXIT_TEMPFAIL


class ChainBrokenError(LedgerError):
    """The chain does not verify; carries the first failing line."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"BROKEN line {line}: {reason}")
        self.line = line
        self.reason = reason


class StateMismatchError(LedgerError):
    """Derived state exists but does not match the chain; ``rebuild-state`` clears it."""


class SchemaValidationError(LedgerError):
    """A payload does not match its event type's JSON Schema."""


class CanonicalizationError(LedgerError):
    """A value cannot be put into RFC 8785 canonical form (a float, a huge integer)."""


class SignatureError(LedgerError):
    """A signature does not verify, or a key cannot be used to verify."""


class ObserverError(LedgerError):
    """A UsageObserver could not give a usable reading; the reason is the message."""

    exit_code = EXIT_USAGE


class UnknownPriceError(UsageError):
    """A model has no price (no override, not in the price snapshot): never taken as $0."""


class UnknownProviderError(UsageError):
    """A verdict names a provider this home does not know (a mistyped one would skirt its cap)."""


class UsageObjectInvalidError(UsageError):
    """A provider's usage object is malformed or of another provider's shape."""


class GatewayKeyError(LedgerError):
    """A presented gateway key is unknown, revoked or expired (the gateway answers 401)."""


class BudgetWarning(UserWarning):
    """A call was admitted at ``warn-90``: the budget is nearly spent."""
