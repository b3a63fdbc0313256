"""Running the console: checks, the listening socket, the sign-in link, uvicorn."""

import os
import socket
import sys
import time
from pathlib import Path

import uvicorn

from ledger.console.app import build_app
from ledger.console.auth import Auth
from ledger.core.console_config import console_address
from ledger.core.proxy_config import ListenAddress
from ledger.edges.tlsfiles import check_tls_files
from ledger.errors import ChainIOError
from ledger.homes import check_home
from ledger.runtime import Runtime


def log(message: str) -> None:
    """One line on stderr, stamped."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    sys.stderr.write(f"{stamp} ledger-console: {message}\n")
    sys.stderr.flush()


def _bind(address: ListenAddress) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address.host, address.port))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise ChainIOError(f"cannot listen on {address}: {exc.strerror}") from exc
    return sock


def run_console(home: Path, listen_option: str | None) -> int:
    """Serve the console for ``home`` until SIGTERM; prints one sign-in link on stderr.

    Raises:
        ConfigError: the configuration is invalid, or the address is refused
            (beyond loopback without TLS files or ``console.behind_proxy``).
        ChainIOError: the address cannot be bound.
    """
    check_home(home)
    settings = Runtime(home).config.console
    address = console_address(settings, listen_option)
    check_tls_files(settings.tls_certfile, settings.tls_keyfile, "console")
    sock = _bind(address)
    bound = ListenAddress(address.host, sock.getsockname()[1])
    auth = Auth(settings.session_hours)
    tls = settings.tls_certfile is not None
    app = build_app(lambda: Runtime(home), auth, secure_cookies=tls or settings.behind_proxy)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", server_header=False,
        ws="none", ssl_certfile=settings.tls_certfile, ssl_keyfile=settings.tls_keyfile,
        proxy_headers=settings.behind_proxy,
    )  # fmt: skip
    scheme = "https" if tls else "http"
    log(f"listening on {scheme}://{bound} for {home} (pid {os.getpid()})")
    log(
        f"sign in (once, within 10 minutes): {scheme}://{bound}/console/login?token="
        f"{auth.one_time_token()}"
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0
