"""Checking a server's TLS certificate and key before it listens, with the standard library.

A file that cannot be read, or a certificate and key that do not load as a
pair, is one ``ledger:`` line naming the setting (exit 78), not a traceback
from inside the server once it starts.
"""

import ssl

from ledger.errors import ConfigError


def check_tls_files(certfile: str | None, keyfile: str | None, table: str) -> None:
    """Load ``certfile`` and ``keyfile`` once as the server will (nothing when neither is set).

    Raises:
        ConfigError: a file cannot be read, or they are not a PEM certificate and its key.
    """
    if certfile is None or keyfile is None:
        return
    for name, path in (("tls_certfile", certfile), ("tls_keyfile", keyfile)):
        try:
            with open(path, "rb"):  # noqa: PTH123 - only whether it can be opened
                pass
        except OSError as exc:
            raise ConfigError(f"{table}.{name}: cannot read {path}: {exc.strerror}") from exc
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"{table}.tls_certfile and {table}.tls_keyfile: not a PEM certificate and its "
            f"private key ({exc})"
        ) from exc
