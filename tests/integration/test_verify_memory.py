"""Verification's memory does not grow with the chain (SPEC §21).

``checkpoint``, ``verify-chain``, ``verify-chain --full``, ``snapshot`` and
``recover`` (of a chain that verifies, which it leaves alone) run
as child processes on a home of 2,000 entries and on one of 200,000; each
child's peak resident memory (``RUSAGE_CHILDREN``'s ``ru_maxrss``, which covers
the workers it waited for) on the long chain stays within a constant of its
figure on the short one. The entries are unsigned (allowed before the
trust store's ``strict_after``) so that the long home builds and verifies in
seconds: what is measured is how the length is handled, not Ed25519.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env
from tests.helpers.bighome import append_entries

SHORT, LONG = 2_000, 200_000
# Far below what holding the long chain costs (its bytes alone are ~90 MiB, a
# hash per entry in Python objects ~30 MiB), above the noise of a process's
# start-up and of buffers that grow with one line.
CONSTANT_KIB = 16 * 1024
# In this order: the checkpoint's mark makes the rest resume after it (``--full``
# reads every entry anyway).
COMMANDS = (
    ("checkpoint",),
    ("verify-chain",),
    ("verify-chain", "--full"),
    ("snapshot",),
    ("recover",),
)


# Runs one command as its only child and prints that child's peak memory (KiB):
# RUSAGE_CHILDREN covers it and the workers it waited for.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak_kib(home: Path, *args: str) -> int:
    measured = subprocess.run(
        [sys.executable, "-c", _MEASURE, sys.executable, "-m", "ledger", "--home", str(home),
         *args],
        env=clean_env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    code, peak = measured.stdout.split()
    assert code == "0", (args, measured.stderr)
    return int(peak)


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> dict[int, Path]:
    built = {}
    for count in (SHORT, LONG):
        home = tmp_path_factory.mktemp(f"home{count}") / "home"
        # Initialised after the entries' times: they may be unsigned.
        subprocess.run(
            [sys.executable, "-m", "ledger", "--home", str(home), "init", "--daily-cap-usd", "100"],
            env=clean_env(), check=True, capture_output=True,
        )  # fmt: skip
        append_entries(home, count, clean_env(), signed=False)
        built[count] = home
    return built


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_peak_memory_is_flat_in_the_chain_length(homes: dict[int, Path], command: tuple[str, ...]):
    short = _peak_kib(homes[SHORT], *command)
    long = _peak_kib(homes[LONG], *command)
    assert long - short <= CONSTANT_KIB, (command, short, long)
