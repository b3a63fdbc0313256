"""The systemd page's steps run as written (SPEC §21), read from the page itself.

The commands of ``docs/operations/systemd.md`` (the block after its
``systemd-steps`` marker) run in a fresh root-owned tree standing for ``/``:
as root, and, where the page says so, as a throw-away system user made by the
page's own ``useradd``. Only what needs a running system manager or the network
is left out (``systemctl``, ``journalctl``, ``apt-get``). Then the service
user runs the launcher the rendered units name, on the home they name: the
product installed under ``/opt`` is readable by it, and the home is its own.
"""

import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGE = REPO / "docs" / "operations" / "systemd.md"
MARKER = "<!-- systemd-steps -->"
LEFT_OUT = ("systemctl", "journalctl", "apt-get")
# What the page names, and where this test puts it.
ROOTED = ("/opt/ledger", "/var/lib/ledger", "/etc/ledger", "/etc/systemd/system")
# A fresh Debian's PATH: the python3 found is the system's, readable by every user.
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the page's steps run as root (useradd)"),
    pytest.mark.skipif(
        shutil.which("useradd") is None or shutil.which("runuser") is None,
        reason="useradd and runuser (Debian's passwd and util-linux) are not installed",
    ),
    pytest.mark.skipif(
        not Path("/usr/bin/python3").exists(), reason="no system python3 to make the venv with"
    ),
]


def page_steps(text: str) -> list[str]:
    """The shell lines of the block after the marker."""
    after = text.split(MARKER, 1)[1]
    block = re.search(r"```sh\n(.*?)```", after, re.DOTALL)
    assert block is not None, "the systemd page has no sh block after its marker"
    return [line for line in block.group(1).splitlines() if line.strip()]


def rooted(line: str, root: Path, user: str) -> str:
    """``line`` with the page's absolute paths under ``root`` and its user named ``user``."""
    for path in ROOTED:
        line = line.replace(path, f"{root}{path}")
    line = re.sub(r"(?<=-u )ledger\b", user, line)
    return re.sub(r"(?<= )ledger$", user, line)


@pytest.fixture
def tree() -> Iterator[tuple[Path, str]]:
    root = Path(tempfile.mkdtemp(prefix="ledger-root-", dir="/var/tmp"))
    root.chmod(0o755)  # a root-owned tree every user may walk, as / is
    for part in ("opt", "var/lib", "etc/systemd/system"):
        (root / part).mkdir(parents=True, exist_ok=True)
    user = f"ldg{os.getpid() % 100000}"
    try:
        yield root, user
    finally:
        subprocess.run(["userdel", user], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def _environment() -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    return {**kept, "PATH": DEBIAN_PATH, "HOME": "/root", "LANG": "C.UTF-8"}


def test_the_systemd_page_runs_as_written(tree):
    root, user = tree
    source = root / "src"
    shutil.copytree(
        REPO, source / "ledger",
        ignore=shutil.ignore_patterns(".git", ".venv", "site", "__pycache__", "*.egg-info"),
    )  # fmt: skip
    ran = []
    for line in page_steps(PAGE.read_text()):
        if line.split()[0] in LEFT_OUT:
            continue
        command = rooted(line, root, user)
        if command.startswith("systemd-analyze") and shutil.which("systemd-analyze") is None:
            continue
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=source, env=_environment(), capture_output=True, text=True, timeout=600,
            check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        ran.append(line)
    assert any(line.startswith("useradd") for line in ran)

    home, launcher = root / "var/lib/ledger", root / "opt/ledger/bin/ledger"
    assert home.stat().st_uid == _uid(user)
    keys = root / "etc/ledger/ledger.env"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert keys.stat().st_uid == 0

    units = source / "ledger-units"
    daemon = (units / "ledger-daemon.service").read_text()
    assert f"ExecStart={launcher} --home {home} daemon" in daemon
    for name in ("ledger-daemon.service", "ledger-proxy.service"):
        text = (units / name).read_text()
        assert "EnvironmentFile=-/etc/ledger/ledger.env" in text
        assert "ANTHROPIC_ADMIN_KEY" in text or name == "ledger-proxy.service"
        assert "ANTHROPIC_API_KEY" in text
    assert "gated model calls on 127.0.0.1:8787" in (units / "ledger-proxy.service").read_text()

    # What the units run, run as the units' user: ProtectHome=yes hides nothing it needs.
    as_user = ["runuser", "-u", user, "--", str(launcher), "--home", str(home)]
    env = {**_environment(), "LEDGER_BILLING_STALE_HALT_PCT": "100"}
    verdict = subprocess.run(
        [*as_user, "verdict", "1"], env=env, capture_output=True, text=True, check=False,
        timeout=120,
    )  # fmt: skip
    assert verdict.returncode == 0, verdict.stderr
    checked = subprocess.run(
        [*as_user, "verify-chain"], env=env, capture_output=True, text=True, check=False,
        timeout=120,
    )  # fmt: skip
    assert checked.stdout.startswith("OK "), checked.stderr
    for part in launcher.parents:
        if part == root.parent:
            break
        assert not str(part).startswith(("/root", "/home"))


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid
