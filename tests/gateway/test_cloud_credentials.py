"""The cloud credentials the gateway sends: its own only (SigV4, a Bedrock API key, a fresh Vertex token)."""

from pathlib import Path

import httpx
import pytest

from tests.fakes import clouds
from tests.gateway.cloud_helpers import (
    MESSAGES,
    MODEL,
    VERTEX_PATH,
    Clouds,
    cloud_home,
    start_cloud_gateway,
)
from tests.gateway.helpers import Proxy

pytestmark = pytest.mark.timeout(120)


def _post(gateway: Proxy, path: str, body: object, secret: str) -> httpx.Response:
    headers = {"authorization": f"Bearer {secret}"}
    return httpx.post(gateway.url + path, json=body, headers=headers, timeout=30)


def test_a_bedrock_api_key_goes_as_a_bearer_token_instead_of_a_signature(
    home: Path, tmp_path: Path
) -> None:
    fake = Clouds()
    secret = cloud_home(home, fake)
    token = {"AWS_BEARER_TOKEN_BEDROCK": clouds.BEDROCK_API_KEY}
    gateway = start_cloud_gateway(home, tmp_path, fake, **token)
    try:
        answer = _post(gateway, f"/bedrock/model/{MODEL}/invoke", MESSAGES, secret)
        assert answer.status_code == 200, answer.text
        assert fake.get("/_control/auth") == {"verified": 1, "refused": 0, "tokens_issued": 0}
    finally:
        assert gateway.stop() == 0
        fake.stop()


@pytest.mark.parametrize(("lifetime", "issued"), [(3600, 1), (60, 2)])
def test_the_vertex_token_is_kept_until_it_is_near_expiry_then_refreshed_before_the_next_call(
    home: Path, tmp_path: Path, lifetime: int, issued: int
) -> None:
    # google-auth refreshes a token within 3 min 45 s of its expiry: a 60 s token at once.
    fake = Clouds(FAKE_CLOUDS_TOKEN_SECONDS=str(lifetime))
    secret = cloud_home(home, fake)
    gateway = start_cloud_gateway(home, tmp_path, fake)
    try:
        for _ in range(2):
            answer = _post(gateway, VERTEX_PATH, MESSAGES, secret)
            assert answer.status_code == 200, answer.text
        assert fake.get("/_control/auth") == {
            "verified": 2, "refused": 0, "tokens_issued": issued,
        }  # fmt: skip
        assert clouds.TOKEN not in "\n".join(gateway.lines)
    finally:
        assert gateway.stop() == 0
        fake.stop()


def test_a_callers_own_sigv4_parts_never_go_upstream_beside_the_gateways(
    home: Path, tmp_path: Path
) -> None:
    fake = Clouds()
    secret = cloud_home(home, fake)
    gateway = start_cloud_gateway(home, tmp_path, fake)
    # An AWS SDK that signed with its own session sends these beside the gateway key.
    own = {"x-amz-date": "20200101T000000Z", "x-amz-security-token": "callers-session-token",
           "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}  # fmt: skip
    try:
        answer = httpx.post(
            f"{gateway.url}/bedrock/model/{MODEL}/invoke", json=MESSAGES, timeout=30,
            headers={"authorization": f"Bearer {secret}", **own},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        sent = [(name.lower(), value) for name, value in fake.get("/_control/last")["headers"]]
        assert [name for name, _ in sent].count("x-amz-date") == 1
        assert not any(value in own.values() for _, value in sent), sent
        assert fake.get("/_control/auth")["verified"] == 1
    finally:
        assert gateway.stop() == 0
        fake.stop()
