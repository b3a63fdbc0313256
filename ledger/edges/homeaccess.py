"""Whether this OS user can use a home as a hook must: read its keys, write its chain and state.

A home made by another user (or a service account) is often listable and its
``ledger.toml`` readable while its keys (0700) and state are not. Checked up
front, the hooks then name that cause and its fixes instead of failing half way
with a halt whose reasons (recover, rebuild the state) would not help.
"""

import os
import pwd
import stat
from pathlib import Path

_READ = os.R_OK
_USE = os.R_OK | os.W_OK | os.X_OK
# What a hook reads or writes, and the access it needs; missing entries are skipped.
_NEEDED = (
    ("", _USE),
    ("keys", os.R_OK | os.X_OK),
    ("ledger.toml", _READ),
    ("events.jsonl", os.R_OK | os.W_OK),
    ("segments", _USE),  # a writer seals the open segment into it
    ("state", _USE),
)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _needs(mode: int) -> str:
    return "read-write" if mode & os.W_OK else "read"


def _refused(home: Path) -> tuple[Path, int] | None:
    """The first entry of ``home`` this user cannot use as a hook must, and the access it needs."""
    for name, mode in _NEEDED:
        path = home / name if name else home
        if (name == "" or path.exists()) and not os.access(path, mode):
            return path, mode
    keys = home / "keys"
    for key in sorted(keys.glob("*.key.pem")) if keys.is_dir() else []:
        if not os.access(key, _READ):
            return key, _READ
    return None


def access_problem(home: Path) -> str | None:
    """Why this user cannot use ``home`` from a hook, naming the cause and its fixes; else ``None``.

    ``None`` too when there is no folder at ``home`` (``home_problem`` says so).
    """
    shown = home.absolute()
    try:
        if not home.is_dir():
            return None  # nothing there, or not a folder: home_problem says which
    except FileNotFoundError:
        return None
    except PermissionError:
        return (
            f"ledger home {shown} cannot be reached by user {_user(os.getuid())}: a folder "
            "above it cannot be entered; " + _fixes(shown, None)
        )
    except OSError:
        return None
    found = _refused(home)
    if found is None:
        return None
    path, mode = found
    try:
        info = path.stat()
        owner, bits = _user(info.st_uid), f"{stat.S_IMODE(info.st_mode):04o}"
    except OSError:
        owner, bits = None, None
    what = "the home itself" if path == home else str(path.relative_to(home))
    held = f" (owned by {owner}, mode {bits})" if owner is not None else ""
    return (
        f"ledger home {shown} cannot be used by user {_user(os.getuid())}: it needs "
        f"{_needs(mode)} access to {what}{held}; " + _fixes(shown, owner)
    )


def _fixes(home: Path, owner: str | None) -> str:
    run_as = f"run Claude Code as {owner}, " if owner else ""
    return (
        f"{run_as}give this user read-write access to the home (e.g. a shared group: "
        f"`chgrp -R GROUP {home} && chmod -R g+rwX {home}`), or on a machine of its own "
        "ask the gateway instead of a home: `ledger hook install --gateway URL --key-env VAR`"
    )
