"""TLS settings shared by the gateway (``[proxy]``) and the console (``[console]``).

Both take ``tls_certfile`` and ``tls_keyfile`` (PEM files, served by uvicorn's
own TLS), given together or not at all, and both treat an address other
machines reach without them as something to refuse (the console) or to warn
about once (the gateway, whose callers present gateway keys).
"""

from typing import Any

from ledger.errors import ConfigError

TLS_KEYS = ("tls_certfile", "tls_keyfile")


def tls_path(value: Any, name: str) -> str:
    """A ``tls_certfile`` / ``tls_keyfile`` value: a non-empty path.

    Raises:
        ConfigError: not a non-empty string; names ``name``.
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: must be the path of a PEM file")
    return value.strip()


def check_tls_pair(certfile: str | None, keyfile: str | None, table: str) -> None:
    """Refuse a certificate without its key, or a key without its certificate.

    Raises:
        ConfigError: one of the two is given without the other.
    """
    if (certfile is None) != (keyfile is None):
        raise ConfigError(f"{table}.tls_certfile and {table}.tls_keyfile: give both or neither")


def clear_text_beyond_loopback(address: Any, certfile: str | None) -> bool:
    """Whether ``address`` (a ``ListenAddress``) is reachable from other machines without TLS."""
    return not address.is_loopback and certfile is None
