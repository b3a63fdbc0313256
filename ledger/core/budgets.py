"""Budgets as operators write them: a USD cap over a period for the calls of a scope.

Pure functions of the configuration: reading ``[[budgets]]`` tables and
which budgets apply to a call. Where a budget's current period starts and ends
is worked out in ``ledger.core.budget_calendar``.
"""

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase, translate
from fractions import Fraction
from typing import Any, NamedTuple

from ledger.core.units import usd_to_micros
from ledger.errors import ConfigError

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
MATCH_KEYS = ("agent", "provider", "model", "session", "key", "tag", "client")
PER_KEYS = ("session", "agent", "key")
CALENDAR_PERIODS = ("day", "week", "month")
# A budget that never resets ("$3 per session"): one period from the first
# record on, so its counter only grows; it is kept as a calendar period whose
# start never changes.
TOTAL_PERIOD = "total"
_ROLLING_RE = re.compile(r"^rolling:([1-9][0-9]{0,5})([hd])$")
# A rolling window keeps one item per record inside it; a year bounds that.
_ROLLING_MAX_HOURS = 366 * 24
_KNOWN_KEYS = frozenset(
    {"name", "usd", "period", "match", "per", "warn_pct", "alert_pcts", "usd_for"}
)
_MAX_MICROS = 2**53 - 1
_GLOB_MAX = 256


class Budget(NamedTuple):
    """One ``[[budgets]]`` table, validated."""

    name: str
    cap_micros: int
    period: str
    match: tuple[tuple[str, str], ...] = ()
    per: str | None = None
    warn_pct: Fraction | None = None
    # A rolling window's length in seconds (from ``period``); ``None`` for a calendar period.
    window_seconds: int | None = None
    # The used-spend percentages a ``warn`` alert is sent at, each once per period
    # (empty: at ``warn_pct``). Alerts only: not part of the derived state's key.
    alert_pcts: tuple[Fraction, ...] = ()
    # ``usd_for``: (glob, cap) pairs for values of ``per``, first match wins, else
    # ``cap_micros``. Applied when a verdict checks the cap: the state is not keyed by it.
    usd_for: tuple[tuple[str, int], ...] = ()

    def cap_for(self, value: str | None) -> int:
        """The cap for one value of ``per``: its ``usd_for`` entry, else ``usd``."""
        if value is not None:
            for glob, micros in self.usd_for:
                if fnmatchcase(value, glob):
                    return micros
        return self.cap_micros

    def as_json(self) -> dict[str, Any]:
        """The definition as plain JSON (what the derived state is keyed by)."""
        return {
            "name": self.name,
            "cap_micros": self.cap_micros,
            "period": self.period,
            "match": [list(pair) for pair in self.match],
            "per": self.per,
            "warn_pct": None if self.warn_pct is None else str(self.warn_pct),
        }


class CallScope(NamedTuple):
    """What a call is known by: the values a budget's ``match`` and ``per`` look at."""

    provider: str | None = None
    agent: str | None = None
    model: str | None = None
    session: str | None = None
    key: str | None = None
    tags: tuple[str, ...] = ()
    client: str | None = None  # from the User-Agent (core.clients), sealed with the verdict

    def value(self, field: str) -> str | None:
        """The call's value for a ``per`` key (session, agent or key)."""
        found: str | None = getattr(self, field)
        return found

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "CallScope":
        """The scope a verdict or record payload sealed (``cycle_id`` is the session)."""
        tags = payload.get("tags")
        return cls(
            provider=_text(payload.get("provider")),
            agent=_text(payload.get("agent")),
            model=_text(payload.get("model") or payload.get("model_id")),
            session=_text(payload.get("cycle_id")),
            key=_text(payload.get("key")),
            tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
            client=_text(payload.get("client")),
        )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_budgets(value: Any, where: str) -> tuple[Budget, ...]:
    """Validate the ``[[budgets]]`` array of tables (or its JSON override).

    Raises:
        ConfigError: not an array of tables, or a table that is malformed; the
            message names the budget (or its position) and the key.
    """
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be an array of tables ([[budgets]])")
    budgets: list[Budget] = []
    seen: set[str] = set()
    for position, table in enumerate(value, start=1):
        label = f"{where}[{position}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{label}: must be a table")
        name = table.get("name")
        if isinstance(name, str) and name:
            # Named as the user wrote it (quoted as JSON: no control character
            # reaches the terminal), so "Research Monthly" is found at a glance.
            label = f"{where} {json.dumps(name[:80], ensure_ascii=False)}"
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ConfigError(f"{label}.name: must match ^[a-z][a-z0-9_-]{{0,63}}$")
        if name in seen:
            raise ConfigError(f"{label}.name: defined twice")
        seen.add(name)
        budgets.append(_budget(table, name, label))
    return tuple(budgets)


def _budget(table: dict[str, Any], name: str, label: str) -> Budget:
    for key in table:
        if key not in _KNOWN_KEYS:
            raise ConfigError(f"{label}.{key}: unknown key")
    if "usd" not in table:
        raise ConfigError(f"{label}.usd: missing (the cap in USD)")
    cap = table["usd"]
    if isinstance(cap, bool) or not isinstance(cap, (int, float, str)):
        raise ConfigError(f"{label}.usd: must be a number ≥ 0")
    try:
        micros = usd_to_micros(cap)
    except ValueError as exc:
        raise ConfigError(f"{label}.usd: {exc}") from exc
    if micros < 0 or micros > _MAX_MICROS:
        raise ConfigError(f"{label}.usd: must be a number ≥ 0 (and exact in the chain)")
    period = table.get("period")
    if not isinstance(period, str) or not _valid_period(period):
        raise ConfigError(
            f'{label}.period: must be "day", "week", "month", "total" (never resets), '
            f'"rolling:<N>h" or "rolling:<N>d" (N ≥ 1, at most a year)'
        )
    per = table.get("per")
    if per is not None and per not in PER_KEYS:
        raise ConfigError(f'{label}.per: must be "session", "agent" or "key"')
    return Budget(
        name, micros, period, _match(table.get("match"), label), per,
        _warn_pct(table.get("warn_pct"), label), _window_seconds(period),
        _alert_pcts(table.get("alert_pcts"), label),
        _usd_for(table.get("usd_for"), per, label),
    )  # fmt: skip


def _window_seconds(period: str) -> int | None:
    found = _ROLLING_RE.fullmatch(period)
    if found is None:
        return None
    return int(found.group(1)) * (3600 if found.group(2) == "h" else 86_400)


def _valid_period(period: str) -> bool:
    if period in CALENDAR_PERIODS or period == TOTAL_PERIOD:
        return True
    found = _ROLLING_RE.fullmatch(period)
    if found is None:
        return False
    hours = int(found.group(1)) * (1 if found.group(2) == "h" else 24)
    return hours <= _ROLLING_MAX_HOURS


def _match(value: Any, label: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(f'{label}.match: must be a table such as {{ agent = "research-*" }}')
    pairs = []
    for key, glob in value.items():
        if key not in MATCH_KEYS:
            raise ConfigError(f"{label}.match.{key}: unknown key (one of {', '.join(MATCH_KEYS)})")
        if not isinstance(glob, str) or not glob or len(glob) > _GLOB_MAX:
            raise ConfigError(f"{label}.match.{key}: must be a non-empty glob pattern")
        pairs.append((key, glob))
    return tuple(sorted(pairs))


def _usd_for(value: Any, per: str | None, label: str) -> tuple[tuple[str, int], ...]:
    """``usd_for = { alice = 5, "ci-*" = 20 }``: a cap per value (glob) of ``per``, in order."""
    if value is None:
        return ()
    if per is None:
        raise ConfigError(f"{label}.usd_for: needs per (a cap for each value of per)")
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"{label}.usd_for: must be a table of value (or glob) = USD")
    found = []
    for glob, cap in value.items():
        if not isinstance(glob, str) or not glob or len(glob) > _GLOB_MAX:
            raise ConfigError(f"{label}.usd_for: each value must be 1 to {_GLOB_MAX} characters")
        if isinstance(cap, bool) or not isinstance(cap, (int, float, str)):
            raise ConfigError(f"{label}.usd_for.{glob}: must be a number ≥ 0")
        try:
            micros = usd_to_micros(cap)
        except ValueError as exc:
            raise ConfigError(f"{label}.usd_for.{glob}: {exc}") from exc
        if micros < 0 or micros > _MAX_MICROS:
            raise ConfigError(f"{label}.usd_for.{glob}: must be a number ≥ 0")
        found.append((glob, micros))
    return tuple(found)


def _alert_pcts(value: Any, label: str) -> tuple[Fraction, ...]:
    """``alert_pcts = [50, 80, 100]``: percentages in [0, 100], sorted, each once."""
    if value is None:
        return ()
    problem = f"{label}.alert_pcts: must be a non-empty list of percentages in [0, 100]"
    if not isinstance(value, list) or not value:
        raise ConfigError(problem)
    try:
        found = {_warn_pct(item, label) for item in value}
    except ConfigError as exc:
        raise ConfigError(problem) from exc
    return tuple(sorted(pct for pct in found if pct is not None))


def _warn_pct(value: Any, label: str) -> Fraction | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{label}.warn_pct: must be a percentage in [0, 100]")
    try:
        pct = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError) as exc:
        raise ConfigError(f"{label}.warn_pct: must be a percentage in [0, 100]") from exc
    if not 0 <= pct <= 100:  # noqa: PLR2004
        raise ConfigError(f"{label}.warn_pct: must be a percentage in [0, 100]")
    return pct


def fingerprint(budgets: Iterable[Budget]) -> str:
    """A digest of the definitions: derived state folded under others is rebuilt."""
    return _fingerprint(tuple(budgets))


# Bumped when what a fold counts changes: counters kept under an older fold
# are counted afresh. 2: a record counts on every budget its call matched.
FOLD_VERSION = 2


@functools.lru_cache(maxsize=8)
def _fingerprint(budgets: tuple[Budget, ...]) -> str:
    # Every command checks the stored state against it; the definitions rarely change.
    text = json.dumps(
        [FOLD_VERSION, *(b.as_json() for b in budgets)], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=256)
def counting_key(budget: Budget) -> str:
    """A digest of what a budget's counters depend on: its name, period, ``match`` and ``per``.

    Not its cap or thresholds: a budget whose cap was raised keeps its
    counters, and one whose ``match`` changed is counted afresh on its own.
    """
    text = json.dumps(
        [FOLD_VERSION, budget.name, budget.period, [list(p) for p in budget.match], budget.per],
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Applicable(NamedTuple):
    """A budget that applies to a call, with the call's value of its ``per`` key."""

    budget: Budget
    per_value: str | None

    @property
    def cap_micros(self) -> int:
        """This value's cap (``usd_for``), else the budget's."""
        return self.budget.cap_for(self.per_value)

    @property
    def scope_key(self) -> str:
        """How the verdict names it as ``deciding_cap``."""
        if self.per_value is None:
            return f"budget:{self.budget.name}"
        return f"budget:{self.budget.name}[{self.per_value}]"


# A glob as ``fnmatchcase`` reads it: its translation, matched from the start.
_Glob = Callable[[str], object]
# Scopes whose applicable budgets an index remembers; past that it starts over
# (an agent picks sessions freely: what is remembered stays bounded).
_SCOPES_KEPT = 4096
_INDEXES_KEPT = 8


class BudgetIndex:
    """What depends only on the definitions, worked out once per configuration.

    Every verdict and every fold asks which budgets apply to a call and looks
    budgets up by name; the globs are compiled once, and the answer for a call
    scope is remembered, so checking a call costs what its applicable budgets
    cost, not a match of every glob of every budget.
    """

    def __init__(self, budgets: tuple[Budget, ...]) -> None:
        self.budgets = budgets
        self.by_name = {budget.name: budget for budget in budgets}
        self.rolling = tuple(budget for budget in budgets if budget.window_seconds is not None)
        self._globs = tuple(
            (budget, tuple((key, _compiled_glob(glob)) for key, glob in budget.match))
            for budget in budgets
        )
        self._found: dict[CallScope, tuple[Applicable, ...]] = {}

    def applicable(self, scope: CallScope) -> tuple[Applicable, ...]:
        """The budgets that apply to a call (see ``applicable``)."""
        try:
            found = self._found.get(scope)
        except TypeError:  # a scope holding a list: answered, not remembered
            return tuple(self._applicable(scope))
        if found is None:
            found = tuple(self._applicable(scope))
            if len(self._found) >= _SCOPES_KEPT:
                self._found.clear()
            self._found[scope] = found
        return found

    def _applicable(self, scope: CallScope) -> Iterable[Applicable]:
        for budget, globs in self._globs:
            per_value = scope.value(budget.per) if budget.per is not None else None
            if budget.per is not None and per_value is None:
                continue
            if _matches(globs, scope):
                yield Applicable(budget, per_value)


@functools.lru_cache(maxsize=256)
def _compiled_glob(glob: str) -> _Glob:
    # The same test ``fnmatchcase`` makes: the whole value against the translated glob.
    return re.compile(translate(glob)).match


def _matches(globs: tuple[tuple[str, _Glob], ...], scope: CallScope) -> bool:
    for key, matches in globs:
        if key == "tag":
            if not any(matches(tag) is not None for tag in scope.tags):
                return False
            continue
        value = scope.value(key)
        if value is None or matches(value) is None:
            return False
    return True


_INDEXES: dict[int, BudgetIndex] = {}


def budget_index(budgets: Sequence[Budget]) -> BudgetIndex:
    """The index of ``budgets``: the one built before for the same (immutable) tuple."""
    if type(budgets) is not tuple:
        return BudgetIndex(tuple(budgets))
    index = _INDEXES.get(id(budgets))
    if index is None or index.budgets is not budgets:
        # The index holds its tuple, so an id in this table is never reused by another.
        if len(_INDEXES) >= _INDEXES_KEPT:
            _INDEXES.clear()
        index = _INDEXES[id(budgets)] = BudgetIndex(budgets)
    return index


def applicable(budgets: Sequence[Budget], scope: CallScope) -> list[Applicable]:
    """The budgets that apply to a call, in the order they are defined.

    Every given ``match`` key must match (a call without a value for a key
    does not match it); a budget with ``per`` applies only to calls carrying
    a value for that key.
    """
    return list(budget_index(budgets).applicable(scope))
