"""The Python API (SPEC §7): the same checks and services as the per-call commands.

```python
import ledger

book = ledger.open()  # the home as the CLI resolves it
v = book.verdict(0.25, provider="anthropic")
book.record(0.21, provider="anthropic", verdict_ref=v.verdict_ref, idempotency_key="call-2f9c")
with book.guard(provider="anthropic", model="claude-sonnet-4-5",
                input_tokens=1200, max_output_tokens=800) as call:
    response = client.messages.create(...)
    call.record(usage=response.usage)
```

Every answer carries the fields the CLI prints as JSON, as attributes. Errors
are ``ledger.LedgerError`` subclasses whose ``exit_code`` is the CLI's.
"""

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from ledger.core import verdict_kind
from ledger.core.halt_text import halt_message
from ledger.errors import EXIT_HALT, BudgetWarning, LedgerError
from ledger.homes import resolve_home
from ledger.runtime import Runtime, serving_many_calls
from ledger.services.gate import call_args, calls
from ledger.services.gate.call_args import amount

# The gate's four answers, typed: ``Verdict.kind`` is one of them.
VerdictKind = verdict_kind.Verdict
# An amount already in integer micro-USD: ``record`` takes it as it is.
Micros = call_args.Micros
log = logging.getLogger("ledger")


class Answer:
    """One JSON document of the CLI, its fields as attributes (``as_dict()`` gives it whole)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self._document = dict(document)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_document"][name]
        except KeyError:
            raise AttributeError(name) from None

    def as_dict(self) -> dict[str, Any]:
        """The document as the CLI prints it."""
        return dict(self._document)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._document!r})"


class BudgetHalted(LedgerError):  # noqa: N818 - SPEC §7 names it
    """A verdict halted the call (``halt-100`` or ``halt-uncertainty``); ``.verdict`` holds it."""

    exit_code = EXIT_HALT

    def __init__(self, verdict: Any) -> None:
        super().__init__(halt_message(verdict))
        self.verdict = verdict


class Verdict(Answer):
    """A pre-call decision; ``allowed`` is true for ``allow`` and ``warn-90``.

    ``kind`` is the verdict typed (a ``VerdictKind``, equal to its text), read
    once from the document: a verdict text this release does not know reads
    as ``halt-uncertainty``, so it is never allowed.
    """

    def __init__(self, document: dict[str, Any], kind: VerdictKind | None = None) -> None:
        super().__init__(document)
        self.kind = VerdictKind.read(document.get("verdict")) if kind is None else kind

    @property
    def allowed(self) -> bool:
        """Whether the call may go ahead (and was reserved)."""
        return self.kind.admits and bool(self._document.get("verdict_ref"))


class Record(Answer):
    """A sealed record (or, for a repeated idempotency key, the first one)."""


class Usage(Answer):
    """Today's figures, as ``ledger usage`` prints them."""


def usage_mapping(usage: Any) -> Any:
    """A usage object as plain JSON data: SDK objects (pydantic models) are dumped."""
    if usage is None or isinstance(usage, Mapping):
        return None if usage is None else dict(usage)
    dump = getattr(usage, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return usage


class Ledger:
    """A home's budget, opened once and used for many calls (thread-safe as the CLI is)."""

    def __init__(self, home: str | Path | None = None) -> None:
        self.home = resolve_home(None if home is None else str(home))
        self._runtime = Runtime(self.home)
        serving_many_calls()

    def verdict(
        self,
        estimate_usd: float | str | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        cycle_id: str | None = None,
        agent: str | None = None,
        tags: Sequence[str] | None = None,
        key: str | None = None,
    ) -> Verdict:
        """Decide and reserve one call, as ``ledger verdict`` does.

        Raises:
            UsageError: a bad argument, or (``UnknownPriceError``) a model with no price.
            ConfigError: the configuration is invalid or has no daily cap.
        """
        document, _admitted = calls.verdict(
            self._runtime, estimate_usd, provider, model=model, input_tokens=input_tokens,
            max_output_tokens=max_output_tokens, cycle_id=cycle_id, agent=agent,
            tags=None if tags is None else list(tags), gateway_key=key,
        )  # fmt: skip
        return Verdict(document)

    def verdict_request(
        self,
        estimate: Any,
        *,
        searches: int = 0,
        cycle_id: str | None = None,
        agent: str | None = None,
    ) -> Verdict:
        """Decide and reserve a request estimated by ``ledger.providers.estimate_request``.

        As the gateway does: input the request only points at (a file by URL or
        id, an earlier response) counts as the model's context window, and up to
        ``searches`` server-side web searches are priced in.

        Raises:
            UsageError: a bad argument, or a model with no price.
            ConfigError: the configuration is invalid or has no daily cap.
        """
        from ledger.services.gate.request_verdict import request_verdict

        decided = request_verdict(
            self._runtime, estimate, searches=searches, cycle_id=cycle_id, agent=agent
        )
        return Verdict(decided.document, decided.verdict)

    def record(
        self,
        actual_usd: float | str | Micros | None = None,
        *,
        provider: str,
        verdict_ref: str | None = None,
        model: str | None = None,
        cycle_id: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        idempotency_key: str | None = None,
        usage: Any = None,
        agent: str | None = None,
        tags: Sequence[str] | None = None,
        key: str | None = None,
        same_record_only: bool = True,
        at_least_usd: float | str | Micros | None = None,
        recorded_by: str | None = None,
        service_tier: str | None = None,
    ) -> Record:
        """Record a call's spend, as ``ledger record`` does; ``usage`` is the provider's object.

        An ``idempotency_key`` is for retrying one record: the same record again
        is a duplicate, another one under the key is refused. The SDK guards pass
        ``same_record_only=False``: they seal a provider's response under its id,
        which the gateway may have sealed already at its own figure.
        ``at_least_usd`` is a floor for a cost priced from ``usage``: a call cut
        short before its final usage arrived costs at least its estimate.
        ``recorded_by`` (``"sdk"`` from the SDK guards) names the path that seals
        responses under their ids: one whose id it already recorded for another
        verdict (a server that reuses ids) counts under a key naming its verdict.
        ``service_tier`` is the tier the request asked for (OpenAI ``priority``,
        ``flex``): ``usage`` is priced at it unless the usage names its own.
        Either amount may be a ``Micros`` (integer micro-USD), taken as it is.

        Raises:
            UsageError: a bad argument or usage object, or a key first used for
                another record (nothing is written).
            LockTimeoutError, ChainIOError: the chain cannot be appended to.
        """
        document, warning = calls.record(
            self._runtime, actual_usd, provider, verdict_ref=verdict_ref, model=model,
            cycle_id=cycle_id, input_tokens=input_tokens, output_tokens=output_tokens,
            idempotency_key_value=idempotency_key, usage_object=usage_mapping(usage),
            agent=agent, tags=None if tags is None else list(tags), gateway_key=key,
            same_record_only=same_record_only,
            floor_micros=0 if at_least_usd is None else amount(at_least_usd, "at_least_usd"),
            recorded_by=recorded_by, service_tier=service_tier,
        )  # fmt: skip
        if warning:
            document = {**document, "warning": warning}
        return Record(document)

    def usage(self, provider: str | None = None) -> Usage:
        """Today's figures (writes nothing), as ``ledger usage`` prints them.

        Raises:
            UsageError: a bad provider id.
            ConfigError: the configuration is invalid.
        """
        return Usage(calls.usage_view(self._runtime, provider))

    def guard(
        self,
        *,
        provider: str,
        model: str | None = None,
        input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        estimate_usd: float | str | None = None,
        cycle_id: str | None = None,
        agent: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> "Guard":
        """A block that runs only when the verdict admits it (``BudgetHalted`` otherwise)."""
        guard = Guard(
            self, provider, model, input_tokens, max_output_tokens, estimate_usd, cycle_id, agent
        )
        guard.tags = None if tags is None else list(tags)
        return guard


class Guard:
    """``with book.guard(...) as call:``: a verdict on entry, ``call.record(...)`` inside.

    Leaving the block without ``call.record`` records nothing: the reservation
    expires after ``usd.reservation_ttl_seconds``.
    """

    def __init__(
        self,
        book: Ledger,
        provider: str,
        model: str | None,
        input_tokens: int | None,
        max_output_tokens: int | None,
        estimate_usd: float | str | None,
        cycle_id: str | None,
        agent: str | None,
    ) -> None:
        self.book = book
        self.provider = provider
        self.model = model
        self._request = (input_tokens, max_output_tokens, estimate_usd, cycle_id, agent)
        self.tags: list[str] | None = None  # what budgets matching tags see
        self.verdict: Verdict | None = None
        self.recorded: Record | None = None

    def __enter__(self) -> Self:
        input_tokens, max_output_tokens, estimate_usd, cycle_id, agent = self._request
        self.verdict = self.book.verdict(
            estimate_usd, provider=self.provider, model=self.model, input_tokens=input_tokens,
            max_output_tokens=max_output_tokens, cycle_id=cycle_id, agent=agent, tags=self.tags,
        )  # fmt: skip
        if not self.verdict.allowed:
            raise BudgetHalted(self.verdict)
        if self.verdict.kind is VerdictKind.WARN_90:
            # As the SDK guards do: a warning the caller's filters may show,
            # log, or make an error (then the block does not run).
            what = self.provider if self.model is None else f"{self.provider}/{self.model}"
            shown = self.verdict.as_dict()
            message = (
                f"ledger: {what} call admitted at warn-90: {shown.get('usage_pct')}% of the "
                f"{shown.get('deciding_cap') or 'aggregate'} cap would be used"
            )
            log.warning("%s (verdict %s)", message, self.verdict.verdict_ref)
            warnings.warn(message, BudgetWarning, stacklevel=2)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    @property
    def idempotency_key(self) -> str:
        """The key of this call's record: one record per admitted verdict, however often tried."""
        if self.verdict is None or not self.verdict.verdict_ref:
            raise LedgerError("call.record outside an admitted guard block")
        return f"guard:{self.verdict.verdict_ref}"

    def record(self, actual_usd: float | str | None = None, *, usage: Any = None) -> Record:
        """Record this call's spend: a USD amount, or the provider's usage object.

        Raises:
            UsageError: a bad amount or usage object.
            LockTimeoutError, ChainIOError: the chain cannot be appended to.
        """
        key = self.idempotency_key
        assert self.verdict is not None  # noqa: S101 - checked by idempotency_key
        self.recorded = self.book.record(
            actual_usd, provider=self.provider, verdict_ref=self.verdict.verdict_ref,
            model=self.model, cycle_id=self._request[3], idempotency_key=key, usage=usage,
            agent=self._request[4], tags=self.tags,
        )  # fmt: skip
        return self.recorded


def open_book(home: str | Path | None = None) -> Ledger:
    """``ledger.open(home=None)``: the home as the CLI resolves it.

    ``home`` else ``$LEDGER_HOME`` else ``./.ledger``.
    """
    return Ledger(home)
