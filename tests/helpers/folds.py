"""Which ranges of the chain a load of the derived state verified and folded."""

from typing import Any

import pytest

import ledger.services.chain.state as state_module


@pytest.fixture
def folds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (start, end) byte ranges each load verified and folded, from now on (in process)."""
    seen: list[tuple[int, int]] = []
    original = state_module._fold_range

    def counting(store: Any, data: Any, trust: Any, start: int, end: int, *a: Any, **k: Any) -> Any:
        seen.append((start, end))
        return original(store, data, trust, start, end, *a, **k)

    monkeypatch.setattr(state_module, "_fold_range", counting)
    return seen
