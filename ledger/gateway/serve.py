"""Running the gateway: the listening socket, uvicorn, the committer, and the SIGTERM drain.

The socket is bound before anything else starts, so an address in use is one
``ledger:`` line naming the process that holds it (exit 75) rather than a
server that never answers. SIGTERM and
SIGINT stop accepting; every request in flight (streams included) completes
and is recorded; then the committer finishes what was submitted and the
process exits 0.
"""

import contextlib
import datetime as dt
import errno
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from ledger.core.proxy_config import DEFAULT_LISTEN, ListenAddress, open_listen
from ledger.core.tls_config import clear_text_beyond_loopback
from ledger.edges.processes import in_use_error
from ledger.edges.tlsfiles import check_tls_files
from ledger.errors import ChainIOError, ConfigError
from ledger.gateway.app import Gateway, build_app
from ledger.gateway.committer import Committer
from ledger.gateway.routing import resolved_upstreams
from ledger.homes import check_home
from ledger.runtime import Runtime


def log(message: str) -> None:
    """One line on the gateway's log (stderr)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: TID251 - log stamps
    sys.stderr.write(f"{stamp} ledger-proxy: {message}\n")
    sys.stderr.flush()


class _Server(uvicorn.Server):
    """uvicorn's server, except that a SIGTERM it drained for ends the process with 0.

    uvicorn raises a caught signal again once it has shut down, which would end
    the process by that signal rather than with the clean exit a drain is.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        import signal

        handled = (signal.SIGTERM, signal.SIGINT)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def listen_address(option: str | None, runtime: Runtime) -> ListenAddress:
    """``--listen``, else ``proxy.listen``, else 127.0.0.1:8787; never open without keys.

    Raises:
        ConfigError: malformed, or not a loopback address while gateway keys are not required.
    """
    settings = runtime.config.proxy
    if option is not None:
        return open_listen(option, "--listen", settings)
    return open_listen(settings.listen or DEFAULT_LISTEN, "proxy.listen", settings)


def bind(address: ListenAddress) -> socket.socket:
    """A listening socket on ``address``.

    Raises:
        AddressInUseError: another process listens there; it is named (exit 75).
        ChainIOError: the address cannot be bound (not this machine's).
    """
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: an answer's headers and body go out as
        # two writes, which Nagle's algorithm and a delayed ACK hold up ~40 ms.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((address.host, address.port))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise in_use_error(str(address), address.port, "proxy.listen (or --listen)") from exc
        raise ChainIOError(f"cannot listen on {address}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock


def run_proxy(home: Path, listen_option: str | None) -> int:
    """Serve the gateway for ``home`` until SIGTERM; 0 after a clean drain.

    Raises:
        ConfigError: the configuration is invalid, has no daily cap, or the
            listen address is refused.
        ChainIOError: the home does not exist or the address cannot be bound.
    """
    check_home(home)
    runtime = Runtime(home)
    settings = runtime.config.proxy
    if runtime.config.daily_cap_micros is None:
        raise ConfigError("usd.daily_cap: required by the gateway (every call is gated)")
    address = listen_address(listen_option, runtime)
    check_tls_files(settings.tls_certfile, settings.tls_keyfile, "proxy")
    sock = bind(address)
    bound = ListenAddress(address.host, sock.getsockname()[1])
    committer = Committer(home, dict(os.environ), log)
    gateway = Gateway(settings, committer, log)
    config = uvicorn.Config(
        build_app(gateway),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=75,  # longer than the SDKs' idle pools keep a connection
        server_header=False,
        # WebSocket upgrades reach the application as plain requests, which it
        # refuses (426) on gated paths: no model call is carried over one.
        ws="none",
        ssl_certfile=settings.tls_certfile,
        ssl_keyfile=settings.tls_keyfile,
    )
    server = _Server(config)
    committer.start()
    for provider, upstream in resolved_upstreams(settings).items():
        log(f"upstream {provider}: {upstream}")
    if clear_text_beyond_loopback(address, settings.tls_certfile):
        # Once, at the start: gateway keys, prompts and answers cross the network
        # in clear text unless a TLS reverse proxy in front carries them.
        sys.stderr.write(
            f"ledger: warning: the gateway listens on {bound}, which other machines reach, "
            "without TLS: gateway keys and prompts cross the network in clear text; set "
            "proxy.tls_certfile and proxy.tls_keyfile, or put a TLS reverse proxy in front "
            "and listen on loopback\n"
        )
    scheme = "https" if settings.tls_certfile is not None else "http"
    log(f"listening on {scheme}://{bound} for {home} (pid {os.getpid()})")
    try:
        server.run(sockets=[sock])
    finally:
        committer.stop()
        sock.close()
    log(
        f"stopped after {committer.jobs} decisions and records in {committer.batches} batches"
        f" ({committer.inline} run at once, without waiting for the worker)"
    )
    return 0
