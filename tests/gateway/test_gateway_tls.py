"""The gateway over TLS: `proxy.tls_certfile` / `proxy.tls_keyfile`, served by uvicorn itself.

A self-signed certificate for 127.0.0.1 is made in the test with
`cryptography`; the official Anthropic SDK, trusting it and nothing else,
calls through the real gateway over HTTPS. An address other machines reach
without TLS starts with one warning on stderr; a certificate that does not
load is one line and exit 78 before anything listens.
"""

import datetime as dt
import ipaddress
import ssl
from pathlib import Path

import anthropic
import httpx
import httpx2
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.conftest import clean_env, run_process
from tests.gateway.helpers import NOW, Upstream, records, start_proxy, write_config

pytestmark = pytest.mark.timeout(120)
WARNING = "ledger: warning: the gateway listens on"


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, signed by its own key; the two PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ledger gateway test")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Fixed and wide: TLS checks it against the machine's clock, not LEDGER_NOW.
        .not_valid_before(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
        .not_valid_after(dt.datetime(2099, 1, 1, tzinfo=dt.UTC))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "gateway.pem", directory / "gateway.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def served(url: str, verify: ssl.SSLContext | bool = True) -> None:
    """Wait until the gateway answers (a refused path) before it is stopped."""
    local = url.replace("0.0.0.0", "127.0.0.1")  # noqa: S104
    assert httpx.get(f"{local}/not-served", verify=verify, timeout=30).status_code == 404


def tls_table(cert: Path, key: Path, more: str = "") -> str:
    return f'\n[proxy]\ntls_certfile = "{cert}"\ntls_keyfile = "{key}"\n{more}'


def test_the_sdk_calls_through_the_gateway_over_https(home, upstream: Upstream, tmp_path):
    cert, key = self_signed(tmp_path)
    write_config(home, upstream.url, extra=tls_table(cert, key))
    proxy = start_proxy(home, "--listen", "127.0.0.1:0")
    try:
        assert proxy.url.startswith("https://127.0.0.1:"), proxy.lines
        trusted = ssl.create_default_context(cafile=str(cert))
        with anthropic.Anthropic(
            base_url=proxy.url, api_key="sk-ant-test", max_retries=0,
            http_client=httpx2.Client(verify=trusted),
        ) as client:  # fmt: skip
            message = client.messages.create(
                model="claude-test", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            )

        assert message.usage.output_tokens > 0
        (record,) = records(home)
        assert record["idempotency_key"] == f"anthropic:{message.id}"
        # A client that does not trust the certificate is refused by TLS itself.
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{proxy.url}/v1/models", timeout=10)
    finally:
        assert proxy.stop() == 0, proxy.lines
    assert not any(WARNING in line for line in proxy.lines)


def test_beyond_loopback_without_tls_warns_once(home, upstream: Upstream, tmp_path):
    write_config(home, upstream.url, extra="\n[proxy]\nrequire_keys = true\n")
    proxy = start_proxy(home, "--listen", "0.0.0.0:0")
    served(proxy.url)
    assert proxy.stop() == 0, proxy.lines

    warned = [line for line in proxy.lines if WARNING in line]
    assert len(warned) == 1, proxy.lines
    assert "without TLS" in warned[0]
    assert "proxy.tls_certfile and proxy.tls_keyfile" in warned[0]


def test_beyond_loopback_with_tls_does_not_warn(home, upstream: Upstream, tmp_path):
    cert, key = self_signed(tmp_path)
    write_config(home, upstream.url, extra=tls_table(cert, key, "require_keys = true\n"))
    proxy = start_proxy(home, "--listen", "0.0.0.0:0")
    served(proxy.url, ssl.create_default_context(cafile=str(cert)))
    assert proxy.stop() == 0, proxy.lines

    assert proxy.url.startswith("https://"), proxy.lines
    assert not any(WARNING in line for line in proxy.lines)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('\n[proxy]\ntls_certfile = "CERT"\n', "give both or neither"),
        ('\n[proxy]\ntls_certfile = "CERT"\ntls_keyfile = "CERT"\n', "not a PEM certificate"),
        ('\n[proxy]\ntls_certfile = "/nonexistent.pem"\ntls_keyfile = "KEY"\n', "cannot read"),
    ],
)
def test_tls_files_that_do_not_load_refuse_to_start(home, upstream, tmp_path, table, said):
    cert, key = self_signed(tmp_path)
    text = table.replace("CERT", str(cert)).replace("KEY", str(key))
    write_config(home, upstream.url, extra=text)

    done = run_process(["--home", str(home), "proxy", "--listen", "127.0.0.1:0"],
                       clean_env(LEDGER_NOW=NOW))  # fmt: skip

    assert done.code == 78, done.stderr
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
