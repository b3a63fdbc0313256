"""The cloud settings of ``[proxy]``: Bedrock's region, the cloud upstreams, Azure's deployments."""

import pytest

from ledger.core.proxy_config import proxy_settings
from ledger.errors import ConfigError


def test_the_cloud_tables_are_read() -> None:
    settings = proxy_settings(
        {
            "bedrock": {"region": "eu-west-1"},
            "upstream": {"bedrock": "http://127.0.0.1:9/", "vertex": "https://v.example"},
            "azure": {"endpoint": "https://acme.openai.azure.com/",
                      "deployments": {"prod-gpt5": "gpt-5"}},
        },
        {},
    )  # fmt: skip
    assert settings.bedrock_region == "eu-west-1"
    assert settings.upstreams["bedrock"] == "http://127.0.0.1:9"
    assert settings.upstreams["vertex"] == "https://v.example"
    assert settings.azure_endpoint == "https://acme.openai.azure.com"
    assert settings.azure_deployments == {"prod-gpt5": "gpt-5"}


def test_the_environment_overrides_a_cloud_table_as_json() -> None:
    settings = proxy_settings(None, {"LEDGER_PROXY_BEDROCK": '{"region": "us-west-2"}'})
    assert settings.bedrock_region == "us-west-2"


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"bedrock": {"region": "Mars"}}, "proxy.bedrock.region"),
        ({"bedrock": {"zone": "x"}}, "proxy.bedrock.zone"),
        ({"azure": {"endpoint": "ftp://x"}}, "proxy.azure.endpoint"),
        ({"azure": {"deployments": {"prod": 5}}}, "proxy.azure.deployments.prod"),
        ({"azure": {"deployments": {"a b": "gpt-5"}}}, "proxy.azure.deployments"),
        ({"providers": {"bedrock": {"url": "http://x"}}}, "proxy.providers.bedrock"),
    ],
)
def test_a_malformed_cloud_setting_names_its_key(table: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        proxy_settings(table, {})
