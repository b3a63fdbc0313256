"""The environment a test starts a browser in: the machine's real clock.

``scripts/faketime-run.sh`` shifts the clock of every process the suite starts
through libfaketime (``LD_PRELOAD``). The product's processes must run
shifted; the browser that looks at them is outside the product, and Chromium
under a shifted clock times out its own page loads and virtual-time budgets.
So a browser and its driver get the environment without libfaketime.
"""

import os

_FAKETIME = ("LD_PRELOAD", "FAKETIME", "FAKETIME_DONT_FAKE_MONOTONIC")


def browser_env() -> dict[str, str]:
    """This process's environment with libfaketime's variables left out."""
    return {name: value for name, value in os.environ.items() if name not in _FAKETIME}
