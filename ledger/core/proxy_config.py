"""The ``[proxy]`` table of ``ledger.toml``: the gateway's settings, validated.

``ledger proxy`` (and ``ledger daemon`` when ``proxy.listen`` is set) read
these. Every key may be overridden by ``LEDGER_PROXY_<KEY>``; the list and the
table (``passthrough``, ``upstream``) are given as JSON there. A malformed or
out-of-range value is a ``ConfigError`` naming the key, never a fallback.
"""

import ipaddress
import json
import re
from typing import Any, NamedTuple

from ledger.core.tls_config import TLS_KEYS, check_tls_pair, tls_path
from ledger.errors import ConfigError

DEFAULT_LISTEN = "127.0.0.1:8787"
DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "google": "https://generativelanguage.googleapis.com",
}
# The clouds' upstreams have no fixed default: it follows the region (or location).
CLOUD_UPSTREAMS = ("bedrock", "bedrock_control", "vertex")
MAX_REQUEST_BYTES = 32 * 1024 * 1024
UPSTREAM_TIMEOUT_SECONDS = 600
# httpx's own default pool size: enough for a busy team's agents on one host,
# small enough that a runaway loop cannot open thousands of sockets upstream.
MAX_UPSTREAM_CONNECTIONS = 100
# A request without an output limit gets this many output tokens (Claude Code's
# own default limit), written into the request so the provider stops there too.
DEFAULT_MAX_OUTPUT_TOKENS = 32_000
# The least output a clamped request keeps: below it an answer is rarely useful.
MIN_OUTPUT_TOKENS = 1024
_MAX_TOKENS = 10_000_000
# How long a stream whose client went away is still read, so its final usage is
# recorded rather than its estimate.
DRAIN_SECONDS = 30
# The uses a server-side tool (web search) gets when a request sets no limit:
# the limit is written into the forwarded request and bounds its estimate.
SERVER_TOOL_MAX_USES = 5
_MAX_TOOL_USES = 1_000
_CENTURY_SECONDS = 36_500 * 86_400
_MAX_BYTES = 2**40
_MAX_CONNECTIONS = 65_536
_PATH_RE = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,1023}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9.-]{1,253}$")
_URL_RE = re.compile(r"^https?://[^\s/?#]+(/[^\s?#]*)?$")
_PORT_MAX = 65_535
_KEYS = (
    "listen",
    "upstream",
    "passthrough",
    "max_request_bytes",
    "upstream_timeout_seconds",
    "max_upstream_connections",
    "require_keys",
    "default_max_output_tokens",
    "min_output_tokens",
    "clamp",
    "providers",
    "drain_seconds",
    "server_tool_max_uses",
    "bedrock",
    "azure",
    *TLS_KEYS,
)
_STRUCTURED = {"upstream", "passthrough", "providers", "bedrock", "azure"}
# A provider id, as verdicts and records take it; the built-in providers and the
# gateway's own path prefixes are not names an OpenAI-compatible provider may take.
_PROVIDER_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_RESERVED_NAMES = frozenset(
    {*DEFAULT_UPSTREAMS, "aggregate", "v1", "v1beta", "bedrock", "vertex", "azure"}
)
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_DEPLOYMENT_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class CompatibleProvider(NamedTuple):
    """An OpenAI-compatible upstream: its base URL and the variable holding its key."""

    url: str
    key_env: str | None = None


class ProxySettings(NamedTuple):
    """The gateway's settings; ``listen`` is ``None`` when ``proxy.listen`` is not set."""

    listen: str | None = None
    upstreams: dict[str, str] = DEFAULT_UPSTREAMS
    passthrough: tuple[str, ...] = ()
    max_request_bytes: int = MAX_REQUEST_BYTES
    upstream_timeout_seconds: int = UPSTREAM_TIMEOUT_SECONDS
    max_upstream_connections: int = MAX_UPSTREAM_CONNECTIONS
    require_keys: bool = False
    default_max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    min_output_tokens: int = MIN_OUTPUT_TOKENS
    clamp: bool = True
    providers: dict[str, CompatibleProvider] = {}  # noqa: RUF012 - never mutated
    drain_seconds: int = DRAIN_SECONDS
    server_tool_max_uses: int = SERVER_TOOL_MAX_USES
    # The gateway's own TLS (PEM files, served by uvicorn); both or neither.
    tls_certfile: str | None = None
    tls_keyfile: str | None = None
    bedrock_region: str | None = None
    azure_endpoint: str | None = None
    azure_deployments: dict[str, str] = {}  # noqa: RUF012 - never mutated


class ListenAddress(NamedTuple):
    """A ``HOST:PORT`` the gateway listens on."""

    host: str
    port: int

    @property
    def is_loopback(self) -> bool:
        """Whether only this machine can reach it (127.0.0.0/8, ::1 or ``localhost``)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name other than localhost may resolve anywhere

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_listen(text: object, name: str) -> ListenAddress:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address) as a ``ListenAddress``.

    Raises:
        ConfigError: not of that form, or the port is over 65535; names ``name``.
    """
    if not isinstance(text, str):
        raise ConfigError(f"{name}: must be HOST:PORT, e.g. {DEFAULT_LISTEN}")
    host, colon, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            host = ""
    elif not _HOST_RE.fullmatch(host):
        host = ""
    if not colon or not host or not port_text.isdigit() or len(port_text) > len(str(_PORT_MAX)):
        raise ConfigError(f"{name}: must be HOST:PORT, e.g. {DEFAULT_LISTEN}, got {text!r}")
    port = int(port_text)
    if port > _PORT_MAX:  # 0: any free port, which the gateway's log names
        raise ConfigError(f"{name}: port must be in 0-{_PORT_MAX}, got {port}")
    return ListenAddress(host, port)


def open_listen(text: object, name: str, settings: ProxySettings) -> ListenAddress:
    """``parse_listen``, refusing an address other machines reach unless keys are required.

    Raises:
        ConfigError: malformed, or not loopback while ``proxy.require_keys`` is off.
    """
    address = parse_listen(text, name)
    if not address.is_loopback and not settings.require_keys:
        raise ConfigError(
            f"{name}: {address} is reachable from other machines; the gateway listens "
            "there only with gateway keys required (proxy.require_keys = true)"
        )
    return address


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,30}\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name}: must be an integer in [{low}, {high}]")
    return value


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise ConfigError(f"{name}: must be true or false")


def _upstreams(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: must be a table of provider = URL")
    upstreams = dict(DEFAULT_UPSTREAMS)
    for provider, url in value.items():
        if provider not in DEFAULT_UPSTREAMS and provider not in CLOUD_UPSTREAMS:
            raise ConfigError(
                f"{name}.{provider}: unknown provider (anthropic, openai, google, bedrock, "
                "bedrock_control or vertex; "
                "OpenAI-compatible providers go in [proxy.providers.<name>])"
            )
        if not isinstance(url, str) or not _URL_RE.fullmatch(url.strip()):
            raise ConfigError(f"{name}.{provider}: must be an http:// or https:// URL")
        upstreams[provider] = url.strip().rstrip("/")
    return upstreams


def _providers(value: Any, name: str) -> dict[str, CompatibleProvider]:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: must be a table of [proxy.providers.<name>] tables")
    found = {}
    for provider, table in value.items():
        label = f"{name}.{provider}"
        if not isinstance(provider, str) or not _PROVIDER_NAME_RE.fullmatch(provider):
            raise ConfigError(f"{label}: a provider name must match ^[a-z][a-z0-9_-]{{0,63}}$")
        if provider in _RESERVED_NAMES:
            raise ConfigError(f"{label}: {provider} is built in or reserved; choose another name")
        if not isinstance(table, dict):
            raise ConfigError(f"{label}: must be a table with url (and key_env)")
        unknown = set(table) - {"url", "key_env"}
        if unknown:
            raise ConfigError(f"{label}.{min(unknown)}: unknown key (url, key_env)")
        url, key_env = table.get("url"), table.get("key_env")
        if not isinstance(url, str) or not _URL_RE.fullmatch(url.strip()):
            raise ConfigError(f"{label}.url: must be an http:// or https:// URL")
        if key_env is not None and (
            not isinstance(key_env, str) or not _ENV_NAME_RE.fullmatch(key_env)
        ):
            raise ConfigError(f"{label}.key_env: must be an environment variable name")
        found[provider] = CompatibleProvider(url.strip().rstrip("/"), key_env)
    return found


def _bedrock(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: must be a table with region")
    unknown = set(value) - {"region"}
    if unknown:
        raise ConfigError(f"{name}.{min(unknown)}: unknown key (region)")
    region = value.get("region")
    if region is not None and (not isinstance(region, str) or not _REGION_RE.fullmatch(region)):
        raise ConfigError(f"{name}.region: must be an AWS region such as us-east-1")
    return {"bedrock_region": region}


def _azure(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: must be a table with endpoint and [deployments]")
    unknown = set(value) - {"endpoint", "deployments"}
    if unknown:
        raise ConfigError(f"{name}.{min(unknown)}: unknown key (endpoint, deployments)")
    endpoint = value.get("endpoint")
    if endpoint is not None and (
        not isinstance(endpoint, str) or not _URL_RE.fullmatch(endpoint.strip())
    ):
        raise ConfigError(f"{name}.endpoint: must be an http:// or https:// URL")
    deployments = value.get("deployments", {})
    if not isinstance(deployments, dict):
        raise ConfigError(f"{name}.deployments: must be a table of deployment = model")
    for deployment, model in deployments.items():
        if not _DEPLOYMENT_RE.fullmatch(str(deployment)):
            raise ConfigError(f"{name}.deployments: {deployment!r} is not a deployment name")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{name}.deployments.{deployment}: must be a model name")
    return {
        "azure_endpoint": endpoint.strip().rstrip("/") if isinstance(endpoint, str) else None,
        "azure_deployments": {str(key): str(model).strip() for key, model in deployments.items()},
    }


def _paths(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{name}: must be an array of paths such as /v1/files")
    for path in value:
        if not isinstance(path, str) or not _PATH_RE.fullmatch(path):
            raise ConfigError(f"{name}: {path!r} is not a path starting with /")
    return tuple(value)


def _convert(key: str, value: Any, name: str) -> Any:
    if key == "listen":
        parse_listen(value, name)
        return value.strip()
    if key == "upstream":
        return _upstreams(value, name)
    if key == "passthrough":
        return _paths(value, name)
    if key == "providers":
        return _providers(value, name)
    if key == "max_request_bytes":
        return _integer(value, name, 1, _MAX_BYTES)
    if key == "upstream_timeout_seconds":
        return _integer(value, name, 0, _CENTURY_SECONDS)
    if key == "max_upstream_connections":
        return _integer(value, name, 1, _MAX_CONNECTIONS)
    if key in {"default_max_output_tokens", "min_output_tokens"}:
        return _integer(value, name, 1, _MAX_TOKENS)
    if key == "drain_seconds":
        return _integer(value, name, 0, _CENTURY_SECONDS)
    if key == "server_tool_max_uses":
        return _integer(value, name, 1, _MAX_TOOL_USES)
    if key in TLS_KEYS:
        return tls_path(value, name)
    return _boolean(value, name)


_FIELD_FOR = {"upstream": "upstreams"}
# Tables that set more than one setting.
_TABLES = {"bedrock": _bedrock, "azure": _azure}


def proxy_settings(table: Any, environ: dict[str, str]) -> ProxySettings:
    """The ``[proxy]`` table (``None`` when absent) with its ``LEDGER_PROXY_*`` overrides.

    Raises:
        ConfigError: an unknown key, or a malformed or out-of-range value; names the key.
    """
    values: dict[str, Any] = {}
    if table is not None:
        if not isinstance(table, dict):
            raise ConfigError("ledger.toml: proxy must be a table")
        for key, value in table.items():
            if key not in _KEYS:
                raise ConfigError(f"ledger.toml: unknown key proxy.{key}")
            if key in _TABLES:
                values.update(_TABLES[key](value, f"proxy.{key}"))
                continue
            values[_FIELD_FOR.get(str(key), str(key))] = _convert(key, value, f"proxy.{key}")
    for key in _KEYS:
        variable = f"LEDGER_PROXY_{key.upper()}"
        if variable not in environ:
            continue
        raw: Any = environ[variable]
        if key in _STRUCTURED:
            try:
                raw = json.loads(raw)
            except ValueError as exc:
                raise ConfigError(f"{variable}: must be JSON ({exc})") from exc
        if key in _TABLES:
            values.update(_TABLES[key](raw, variable))
            continue
        values[_FIELD_FOR.get(key, key)] = _convert(key, raw, variable)
    settings = ProxySettings(**values)
    check_tls_pair(settings.tls_certfile, settings.tls_keyfile, "proxy")
    return settings
