"""The gateway's own cloud credentials: what it signs or sends with each cloud's calls.

- **Bedrock**: ``AWS_BEARER_TOKEN_BEDROCK`` as ``Authorization: Bearer`` when
  set; else a SigV4 signature (botocore) with the standard AWS credential chain
  of the gateway's environment (variables, shared files, SSO, container or
  instance roles), refreshed by botocore as they expire. The path is signed as
  it is sent (a model id's ``:`` unescaped).
- **Vertex AI**: a Bearer token from google-auth's application default
  credentials, refreshed before it expires. A token is never logged.
- **Azure OpenAI**: the ``api-key`` header from ``AZURE_OPENAI_API_KEY``.

botocore and google-auth are imported only when a signer is made, so a
gateway that serves none of these routes never needs them (the ``[bedrock]``
and ``[vertex]`` extras).
"""

import threading
from collections.abc import Mapping
from typing import Any

from ledger.errors import ConfigError

_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


class CloudCredentialError(Exception):
    """The gateway has no usable credential for a cloud; the message says which."""


class BedrockSigner:
    """Signs Bedrock requests with SigV4, or sends the Bedrock API key as a Bearer token."""

    def __init__(self, region: str, environ: Mapping[str, str]) -> None:
        self.region = region
        self._token = environ.get("AWS_BEARER_TOKEN_BEDROCK", "").strip() or None
        self._credentials: Any = None
        if self._token is None:
            try:
                import botocore.session
            except ImportError as exc:
                raise ConfigError(
                    "the /bedrock routes need botocore: pip install 'ledger[bedrock]'"
                ) from exc
            session = botocore.session.Session()
            self._credentials = session.get_credentials()

    def headers(self, method: str, url: str, body: bytes, service: str) -> dict[str, str]:
        """The headers that authorise ``method url`` with ``body`` (may refresh; blocking).

        ``service`` is ``bedrock`` for both the runtime and the control plane.

        Raises:
            CloudCredentialError: the credential chain found no AWS credentials.
        """
        if self._token is not None:
            return {"authorization": f"Bearer {self._token}"}
        if self._credentials is None:
            raise CloudCredentialError(
                "the gateway has no AWS credentials (AWS_ACCESS_KEY_ID…, a profile or a role) "
                "and no AWS_BEARER_TOKEN_BEDROCK to call Bedrock with"
            )
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = self._credentials.get_frozen_credentials()
        # Host and X-Amz-Date are signed: the headers passed on as the client sent them are not.
        request = AWSRequest(method=method, url=url, data=body, headers={})
        SigV4Auth(frozen, service, self.region).add_auth(request)
        signed = {name.lower(): str(value) for name, value in request.headers.items()}
        return {
            name: value
            for name, value in signed.items()
            if name in {"authorization", "x-amz-date", "x-amz-security-token"}
        }


class VertexTokens:
    """Bearer tokens from application default credentials, refreshed before they expire."""

    def __init__(self) -> None:
        try:
            import google.auth
            import google.auth.transport.requests
        except ImportError as exc:
            raise ConfigError(
                "the /vertex routes need google-auth: pip install 'ledger[vertex]'"
            ) from exc
        self._lock = threading.Lock()
        self._request = google.auth.transport.requests.Request()
        try:
            self._credentials, _project = google.auth.default(scopes=_SCOPES)
        except google.auth.exceptions.DefaultCredentialsError as exc:
            raise CloudCredentialError(
                "the gateway has no Google application default credentials "
                "(GOOGLE_APPLICATION_CREDENTIALS or gcloud auth application-default login)"
            ) from exc

    def headers(self) -> dict[str, str]:
        """``Authorization: Bearer <token>``, refreshing it first when due (blocking).

        Raises:
            CloudCredentialError: the token could not be refreshed.
        """
        import google.auth.exceptions

        with self._lock:
            if not self._credentials.valid:
                try:
                    self._credentials.refresh(self._request)  # type: ignore[no-untyped-call]
                except google.auth.exceptions.GoogleAuthError as exc:
                    # The error names the failure, never the credential.
                    raise CloudCredentialError(
                        f"the gateway's Google credentials could not be refreshed "
                        f"({type(exc).__name__})"
                    ) from exc
            return {"authorization": f"Bearer {self._credentials.token}"}


def azure_headers(environ: Mapping[str, str]) -> dict[str, str]:
    """``api-key`` from ``AZURE_OPENAI_API_KEY``.

    Raises:
        CloudCredentialError: the variable is not set.
    """
    key = environ.get("AZURE_OPENAI_API_KEY", "").strip()
    if not key:
        raise CloudCredentialError("the gateway has no AZURE_OPENAI_API_KEY to call Azure with")
    return {"api-key": key}
