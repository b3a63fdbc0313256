"""Rendering the shipped systemd units for one installation (``ledger deploy systemd``).

The units in ``deploy/systemd`` are written for a system install: the launcher
at ``/opt/ledger/bin/ledger`` (a virtual environment the service user can
read), the home at ``/var/lib/ledger``, a ``ledger`` user. Rendering puts in
the real launcher and the absolute home, points
``Documentation=`` at a file that exists (or drops it), and for ``--user``
turns each unit into one a user's own systemd manager can run: no ``User=``,
no settings only the system manager may apply, ``default.target``, comments
with user-mode install steps, and metrics written under the home.
Pure text in, text out: the files are read and written by the caller.
"""

import re
from typing import NamedTuple

SYSTEM_LAUNCHER = "/opt/ledger/bin/ledger"
_OLD_LAUNCHER = "/usr/local/bin/ledger"
SYSTEM_HOME = "/var/lib/ledger"
USER_LAUNCHER = "%h/.local/bin/ledger"
USER_HOME = "%h/.ledger"
SYSTEM_OBSERVER_ENV = "-/etc/ledger/observer.env"
USER_OBSERVER_ENV = "-%h/.config/ledger/observer.env"
SYSTEM_KEYS_ENV = "/etc/ledger/ledger.env"
USER_KEYS_ENV = "%h/.config/ledger/ledger.env"
DEFAULT_PROXY_LISTEN = "127.0.0.1:8787"
_PROXY_DESCRIPTION = "gated model calls on "
# Written for the agents' own user: the system daemon serves its home itself.
USER_ONLY_UNITS = frozenset({"ledger-serve.service"})
# Settings a user's systemd manager cannot apply (they need privileges or
# namespaces it may not have), and the system user the units run as.
_SYSTEM_ONLY_SETTINGS = frozenset(
    {
        "User", "Group", "StateDirectory", "StateDirectoryMode", "ProtectSystem",
        "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateNetwork",
        "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
        "ProtectControlGroups", "ProtectClock", "ProtectHostname", "ProtectProc",
        "ProcSubset", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID",
        "LockPersonality", "RemoveIPC", "CapabilityBoundingSet", "AmbientCapabilities",
        "SystemCallFilter", "SystemCallArchitectures", "RestrictAddressFamilies",
        "ReadWritePaths", "IOSchedulingClass",
    }
)  # fmt: skip
# The network-online target is the system manager's; a user manager has none.
_SYSTEM_TARGET_SETTINGS = {("After", "network-online.target"), ("Wants", "network-online.target")}
_HOME_PREFIXES = ("/home/", "/root/", "/run/user/")
_TMP_PREFIXES = ("/tmp/", "/var/tmp/")  # noqa: S108 - paths compared, never written
# The metrics unit's system target, node_exporter's textfile collector folder.
SYSTEM_METRICS_FILE = "/var/lib/node_exporter/textfile_collector/ledger.prom"
USER_METRICS_FILE = "ledger.prom"  # in the home: the user may not write a system folder
# Comment lines that describe a system install, and what a user's unit says instead.
_INDENTED = re.compile(r"^#\s{2,}\S")
_USER_WORDS = (
    ("here the `ledger` user", "here your own user"),
    ("The ledger user needs write access to the collector folder (and nothing else there).",
     "As a user unit it writes ledger.prom in the home: point the collector there."),
    ("--collector.textfile.directory=/var/lib/node_exporter/textfile_collector",
     "--collector.textfile.directory set to the home"),
    (", root-owned.", ", owned by you."),
    ("sudo -u ledger ledger", "ledger"),
)  # fmt: skip


class Installation(NamedTuple):
    """Where this installation's parts are, as absolute paths."""

    launcher: str
    home: str
    runbook: str | None
    user: bool
    proxy_listen: str = DEFAULT_PROXY_LISTEN  # the home's proxy.listen, named in the unit


def unreadable_launcher(launcher: str) -> bool:
    """Whether a system unit's ``User=ledger`` cannot run ``launcher`` (``ProtectHome=yes``)."""
    return launcher.startswith(_HOME_PREFIXES)


def wanted(name: str, user: bool) -> bool:
    """Whether the unit ``name`` is rendered for a user (``True``) or the system."""
    return user or name not in USER_ONLY_UNITS


def render_unit(text: str, where: Installation, name: str = "") -> str:
    """``text`` (the shipped unit ``name``) for the installation ``where``."""
    out = [f"# Rendered by `ledger deploy systemd` for the home {where.home}."]
    in_install_steps = False
    for line in text.splitlines():
        if line.startswith("#"):
            # A system install's steps (the indented lines after "# Install:") are
            # replaced as a whole in a user unit.
            in_install_steps = where.user and (
                line.startswith("# Install:") or (in_install_steps and bool(_INDENTED.match(line)))
            )
            if in_install_steps and not line.startswith("# Install:"):
                continue
            out.extend(_comment(line, where, name))
            continue
        in_install_steps = False
        rendered = _setting(line, where)
        if rendered is not None:
            out.append(_placed(rendered, where))
    return "\n".join(out) + "\n"


def user_install_steps(name: str, home: str) -> list[str]:
    """How a user installs and starts the unit ``name`` with their own systemd manager."""
    # A timer is what is enabled; its service runs when the timer fires.
    return [
        f"ledger --home {home} deploy systemd --user --output ~/.config/systemd/user",
        f"systemctl --user daemon-reload && systemctl --user enable --now {name}",
        'loginctl enable-linger "$USER"   # keep it running without a login session',
    ]


def _comment(line: str, where: Installation, name: str) -> list[str]:
    """A comment line for ``where``: a user unit's comments give user-mode steps."""
    if not where.user:
        return [_placed(line, where)]
    if line.startswith("# Install:"):
        steps = user_install_steps(name or "the unit", where.home)
        return ["# Install as your own user (no root, nothing in /etc):"] + [
            f"#   {step}" for step in steps
        ]
    for system, user in _USER_WORDS:
        line = line.replace(system, user)
    return [_placed(line, where)]


def _setting(line: str, where: Installation) -> str | None:
    """A unit's line for ``where``; ``None`` drops it."""
    key, sep, value = line.partition("=")
    if not sep:
        return line
    if key == "Documentation":
        return None if where.runbook is None else f"Documentation=file://{where.runbook}"
    if where.user and (key in _SYSTEM_ONLY_SETTINGS or (key, value) in _SYSTEM_TARGET_SETTINGS):
        return None
    if key.startswith("StateDirectory") and where.home != SYSTEM_HOME:
        return None  # it would make /var/lib/ledger, which is not the home
    if key == "PrivateTmp" and where.home.startswith(_TMP_PREFIXES):
        return None  # a private /tmp would hide a home kept there
    if key == "ProtectHome" and where.home.startswith(_HOME_PREFIXES):
        return "ProtectHome=read-only"  # ReadWritePaths opens the home itself
    if key == "WantedBy" and where.user:
        return "WantedBy=default.target"
    return line


def _placed(line: str, where: Installation) -> str:
    """``line`` with the shipped launcher, home and observer file put where they are."""
    for launcher in (SYSTEM_LAUNCHER, _OLD_LAUNCHER, USER_LAUNCHER):
        line = line.replace(launcher, where.launcher)
    line = line.replace(
        _PROXY_DESCRIPTION + DEFAULT_PROXY_LISTEN, _PROXY_DESCRIPTION + where.proxy_listen
    )
    for home in (SYSTEM_HOME, USER_HOME):
        line = line.replace(home, where.home)
    if where.user:
        line = line.replace(SYSTEM_OBSERVER_ENV, USER_OBSERVER_ENV)
        line = line.replace(SYSTEM_KEYS_ENV, USER_KEYS_ENV)
        line = line.replace(SYSTEM_METRICS_FILE, f"{where.home}/{USER_METRICS_FILE}")
    return line
