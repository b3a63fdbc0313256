"""Whose key goes where: each provider's credential, by the upstream a route goes to.

One row per provider. The gateway finds a request's route first (and so its
upstream), then reads that provider's row here, and nothing else decides which
key crosses: not ``anthropic-version``, not the header a key came in. So a key
is only ever sent to the upstream of its own provider, on every route, free or
gated.

A row says where the gateway puts its own key when the caller presented a
gateway key (``variable``, ``header``, ``scheme``), and which of the caller's
own credential headers and query parameters it forwards when the caller
brought its own key (``accepts``, ``query``). Every other credential a
request carries stays behind.

A new route family (a cloud's hosted models, say) adds its provider's row.
"""

from collections.abc import Mapping
from dataclasses import dataclass

GATEWAY_KEY_PREFIX = "lk_"


@dataclass(frozen=True, slots=True)
class Credential:
    """How one provider's upstream takes a key.

    ``variable`` is the gateway's environment variable holding its own key
    (``None``: the upstream takes none, a local vLLM or Ollama); ``header`` and
    ``scheme`` how that key is sent (``"Bearer "`` before it in
    ``authorization``); ``accepts`` the caller's own credential headers that
    go to this upstream, and ``query`` the query parameters that may carry a
    key for it (Gemini's ``?key=``).
    """

    variable: str | None
    header: str
    scheme: str = ""
    accepts: tuple[str, ...] = ()
    query: tuple[str, ...] = ()

    def attached(self, secret: str) -> dict[str, str]:
        """The header that carries the gateway's own ``secret`` to this upstream."""
        return {self.header: f"{self.scheme}{secret}"}


# Anthropic's and OpenAI's clients send a key as x-api-key or a bearer token
# (Claude Code's ANTHROPIC_AUTH_TOKEN is one); Google's as x-goog-api-key or ?key=,
# and OAuth clients as a bearer token.
CREDENTIALS: dict[str, Credential] = {
    "anthropic": Credential(
        "ANTHROPIC_API_KEY", "x-api-key", accepts=("x-api-key", "authorization")
    ),
    "openai": Credential(
        "OPENAI_API_KEY", "authorization", "Bearer ", accepts=("authorization", "x-api-key")
    ),
    "google": Credential(
        "GEMINI_API_KEY",
        "x-goog-api-key",
        accepts=("x-goog-api-key", "authorization"),
        query=("key",),
    ),
}

# Every header and query parameter any provider's clients put a key in: where a
# gateway key is looked for, and what never crosses unless a row lets it.
CREDENTIAL_HEADERS: tuple[str, ...] = ("x-api-key", "authorization", "x-goog-api-key")
CREDENTIAL_QUERY: tuple[str, ...] = ("key",)


def compatible_credential(key_env: str | None) -> Credential:
    """The credential of an OpenAI-compatible upstream whose key is in ``key_env``."""
    openai = CREDENTIALS["openai"]
    return Credential(key_env, openai.header, openai.scheme, openai.accepts)


def presented_keys(headers: Mapping[str, str], query: list[tuple[str, str]]) -> set[str]:
    """Every gateway key (``lk_…``) a request carries, in any header or query position.

    ``headers`` are lower-case; ``authorization`` counts with the ``Bearer`` scheme.
    """
    found: set[str] = set()
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name, "").strip()
        if name == "authorization":
            scheme, _, token = value.partition(" ")
            value = token.strip() if scheme.lower() == "bearer" else ""
        if value.startswith(GATEWAY_KEY_PREFIX):
            found.add(value)
    for name, value in query:
        if name in CREDENTIAL_QUERY and value.strip().startswith(GATEWAY_KEY_PREFIX):
            found.add(value.strip())
    return found


def forwarded_query(
    query: list[tuple[str, str]], credential: Credential, *, own_key: bool
) -> list[tuple[str, str]]:
    """The query parameters to send upstream: a key only the caller's own, to its provider."""
    return [
        (name, value)
        for name, value in query
        if name not in CREDENTIAL_QUERY
        or (own_key and name in credential.query and not value.startswith(GATEWAY_KEY_PREFIX))
    ]
