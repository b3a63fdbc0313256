#!/usr/bin/env python3
"""A misbehaving-on-request UsageObserver for tests: ``fake_observer.py MODE PROVIDER``.

Side channels (passed through because of their ``LEDGER_OBSERVER_`` prefix):
``LEDGER_OBSERVER_PIDFILE`` receives the pids of this process and of a child it
started (mode ``sleep``); ``LEDGER_OBSERVER_ENVFILE`` receives the environment
this process saw and its argv (mode ``env``).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

OK = '{"usd_used": 12.345678, "billing_ts": "2026-03-01T11:58:00Z"}'

# modes that print fixed text and exit 0
PRINTS = {
    "ok": OK + "\n",
    "ok_server_ts": (
        '{"usd_used": 0.1, "billing_ts": "2026-03-01T11:58:00+00:00",'
        ' "server_ts": "2026-03-01T13:00:05+01:00"}'
    ),
    "unreachable": '{"_unreachable": true, "_reason": "billing API down"}',
    "defer": '{"_defer": true, "_reason": "rate_limited"}',
    "nan": '{"usd_used": NaN, "billing_ts": "2026-03-01T11:58:00Z"}',
    "negative": '{"usd_used": -1.5, "billing_ts": "2026-03-01T11:58:00Z"}',
    "missing": '{"usd_used": 1.5}',
    "wrong_types": '{"usd_used": "1.5", "billing_ts": 1772366280}',
    "invalid_json": "{usd_used: 1.5,",
    "empty": "",
}


def sleep_with_child() -> int:
    """Start a grandchild in the same process group, record both pids, hang."""
    child = subprocess.Popen(["sleep", "30"])
    pidfile = Path(os.environ["LEDGER_OBSERVER_PIDFILE"])
    pidfile.write_text(f"{os.getpid()} {child.pid}\n", encoding="utf-8")
    time.sleep(30)
    sys.stdout.write(OK)
    return 0


def silent_hang() -> int:
    """Close stdout at once, then never exit."""
    os.close(1)
    time.sleep(30)
    return 0


def flood() -> int:
    """10 MiB on stdout."""
    block = b"x" * 65536
    for _ in range(160):
        sys.stdout.buffer.write(block)
    sys.stdout.buffer.flush()
    return 0


def exit3() -> int:
    sys.stdout.write(OK)
    return 3


def dump_env() -> int:
    """Record the environment and argv this observer was given."""
    envfile = Path(os.environ["LEDGER_OBSERVER_ENVFILE"])
    envfile.write_text(json.dumps({"env": dict(os.environ), "argv": sys.argv}), encoding="utf-8")
    sys.stdout.write(OK)
    return 0


def echo_stdin_length() -> int:
    data = sys.stdin.read()
    sys.stdout.write(json.dumps({"usd_used": len(data), "billing_ts": "2026-03-01T11:58:00Z"}))
    return 0


def stderr_flood() -> int:
    """4 MiB of stderr, then a good answer."""
    text = "e" * 65536
    for _ in range(64):
        sys.stderr.write(text)
    sys.stderr.flush()
    sys.stdout.write(OK)
    return 0


ACTIONS = {
    "sleep": sleep_with_child,
    "silent_hang": silent_hang,
    "flood": flood,
    "exit3": exit3,
    "env": dump_env,
    "stdin": echo_stdin_length,
    "stderr_flood": stderr_flood,
}


def main() -> int:
    mode = sys.argv[1]
    if mode in PRINTS:
        sys.stdout.write(PRINTS[mode])
        status = 0
    elif mode in ACTIONS:
        status = ACTIONS[mode]()
    else:
        return 64
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
