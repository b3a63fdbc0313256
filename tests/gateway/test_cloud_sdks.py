"""The SDK settings the cloud pages give, as written there, through the gateway to the fake clouds."""

from collections.abc import Iterator

import pytest
from anthropic import AnthropicVertex
from openai import AzureOpenAI, NotFoundError, OpenAI

from tests.gateway.cloud_helpers import (
    Served,
    served_clouds,
)
from tests.gateway.helpers import records

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_clouds(tmp_path_factory.mktemp("cloud-sdks")) as running:
        yield running


def _recorded(served: Served, provider: str) -> list[str]:
    return [r["idempotency_key"] for r in records(served.home) if r["provider"] == provider]


def test_anthropic_vertex_with_the_gateway_key_as_its_access_token(served: Served) -> None:
    client = AnthropicVertex(
        base_url=f"{served.gateway.url}/vertex/v1", project_id="acme-ml", region="us-east5",
        access_token=served.secret, max_retries=0,
    )  # fmt: skip
    message = client.messages.create(
        model="claude-sonnet-4-5@20250929", max_tokens=200,
        messages=[{"role": "user", "content": "hi"}],
    )  # fmt: skip
    assert f"anthropic:{message.id}" in _recorded(served, "vertex")


def test_openai_on_the_azure_v1_surface(served: Served) -> None:
    client = OpenAI(
        base_url=f"{served.gateway.url}/azure/openai/v1", api_key=served.secret, max_retries=0
    )
    response = client.responses.create(model="prod-gpt5", input="hello", max_output_tokens=200)
    assert response.model == "gpt-5"
    assert f"azure:{response.id}" in _recorded(served, "azure")


def test_azure_openai_chat_goes_by_its_deployment_and_its_responses_are_not_served(
    served: Served,
) -> None:
    client = AzureOpenAI(
        azure_endpoint=f"{served.gateway.url}/azure", api_key=served.secret,
        api_version="2025-04-01-preview", max_retries=0,
    )  # fmt: skip
    completion = client.chat.completions.create(
        model="prod-gpt5", max_completion_tokens=200,
        messages=[{"role": "user", "content": "hi"}],
    )  # fmt: skip
    assert f"azure:{completion.id}" in _recorded(served, "azure")
    # Its Responses API goes to /openai/responses, which the gateway does not serve.
    with pytest.raises(NotFoundError):
        client.responses.create(model="prod-gpt5", input="hello", max_output_tokens=200)
