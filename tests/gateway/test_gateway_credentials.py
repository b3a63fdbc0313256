"""Every route × every credential header mix: which key reached which upstream.

Each provider has its own fake upstream (its own process and port), so where
a key arrived is the host it reached. The caller's own keys and the gateway's
keys all differ, so each one seen upstream names where it came from. A key
may only ever reach its own provider's upstream, and a gateway key none.
"""

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import clean_env, run_process
from tests.gateway.helpers import NOW, PRICES, Proxy, Upstream, start_proxy, start_upstream

pytestmark = pytest.mark.timeout(300)
UPSTREAMS = ("anthropic", "openai", "google", "deepseek")
# The gateway's own keys, one per upstream.
GATEWAY_KEYS = {
    "anthropic": ("x-api-key", "gw-anthropic"),
    "openai": ("authorization", "Bearer gw-openai"),
    "google": ("x-goog-api-key", "gw-google"),
    "deepseek": ("authorization", "Bearer gw-deepseek"),
}
ENVIRON = {
    "ANTHROPIC_API_KEY": "gw-anthropic",
    "OPENAI_API_KEY": "gw-openai",
    "GEMINI_API_KEY": "gw-google",
    "DEEPSEEK_API_KEY": "gw-deepseek",
}
# The caller's own key in each position a provider's clients put one.
POSITIONS = {
    "x-api-key": "sk-ant-caller",
    "authorization": "Bearer sk-oai-caller",
    "x-goog-api-key": "AIza-caller-header",
    "?key": "AIza-caller-query",
}
# Which of the caller's own credentials each upstream may receive.
ACCEPTED = {
    "anthropic": {"x-api-key", "authorization"},
    "openai": {"x-api-key", "authorization"},
    "deepseek": {"x-api-key", "authorization"},
    "google": {"x-goog-api-key", "authorization", "?key"},
}
ANTHROPIC = {
    "model": "claude-test",
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "hi"}],
}
CHAT = {"model": "gpt-test", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt-test", "max_output_tokens": 10, "input": "hi"}
GEMINI = {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 10}}
DEEPSEEK = {**CHAT, "model": "deepseek-test"}


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    body: dict[str, Any] | None
    upstream: str | None  # None: decided by anthropic-version (GET /v1/models)


ROUTES = (
    Case("POST", "/v1/messages", ANTHROPIC, "anthropic"),
    Case("POST", "/v1/messages/count_tokens", ANTHROPIC, "anthropic"),
    Case("GET", "/v1/models", None, None),
    Case("POST", "/v1/chat/completions", CHAT, "openai"),
    Case("POST", "/v1/responses", RESPONSES, "openai"),
    Case("POST", "/v1beta/models/gemini-test:generateContent", GEMINI, "google"),
    Case("POST", "/v1beta/models/gemini-test:streamGenerateContent", GEMINI, "google"),
    Case("POST", "/v1beta/models/gemini-test:countTokens", GEMINI, "google"),
    Case("GET", "/v1beta/models", None, "google"),
    Case("GET", "/v1beta/models/gemini-test", None, "google"),
    Case("POST", "/deepseek/v1/chat/completions", DEEPSEEK, "deepseek"),
    Case("POST", "/deepseek/v1/responses", {**RESPONSES, "model": "deepseek-test"}, "deepseek"),
)


@pytest.fixture
def upstreams() -> Iterator[dict[str, Upstream]]:
    started = {name: start_upstream() for name in UPSTREAMS}
    yield started
    for server in started.values():
        server.stop()


@pytest.fixture
def gateway(home: Path, upstreams: dict[str, Upstream]) -> Iterator[tuple[Proxy, str]]:
    prices = "".join(
        f'\n[prices."{name}"]\ninput_per_mtok = {rates[0]}\noutput_per_mtok = {rates[1]}\n'
        for name, rates in {**PRICES, "deepseek/deepseek-test": (1, 2)}.items()
    )
    (home / "ledger.toml").write_text(
        "[usd]\ndaily_cap = 100\n\n[billing]\nstale_halt_pct = 100\n\n"
        f'[proxy.upstream]\nanthropic = "{upstreams["anthropic"].url}"\n'
        f'openai = "{upstreams["openai"].url}"\ngoogle = "{upstreams["google"].url}"\n\n'
        f'[proxy.providers.deepseek]\nurl = "{upstreams["deepseek"].url}/v1"\n'
        f'key_env = "DEEPSEEK_API_KEY"\n{prices}'
    )
    issued = run_process(
        ["--home", str(home), "keys", "issue", "matrix"], clean_env(LEDGER_NOW=NOW)
    )
    assert issued.code == 0, issued.stderr
    running = start_proxy(home, "--listen", "127.0.0.1:0", env=clean_env(LEDGER_NOW=NOW, **ENVIRON))
    yield running, issued.json()["key"]
    assert running.stop() == 0, running.lines


def _mixes(secret: str) -> Iterator[tuple[bool, dict[str, str], str | None]]:
    """(anthropic-version sent, credentials by position, where the gateway key is)."""
    names = list(POSITIONS)
    for versioned in (False, True):
        for size in range(len(names) + 1):
            for chosen in itertools.combinations(names, size):
                yield versioned, {name: POSITIONS[name] for name in chosen}, None
        for keyed in names:
            others = [name for name in names if name != keyed]
            for size in range(len(others) + 1):
                for chosen in itertools.combinations(others, size):
                    credentials = {name: POSITIONS[name] for name in chosen}
                    value = f"Bearer {secret}" if keyed == "authorization" else secret
                    yield versioned, {**credentials, keyed: value}, keyed


def _credentials_seen(sent: dict[str, Any]) -> dict[str, str]:
    seen = {name: sent["headers"][name] for name in POSITIONS if name in sent["headers"]}
    for pair in sent["query"].split("&"):
        name, _, value = pair.partition("=")
        if name == "key":
            seen["?key"] = value
    return seen


def test_every_key_reaches_only_its_own_providers_upstream(gateway, upstreams):
    """12 routes × 96 header mixes: the caller's own keys go only where their provider
    is (by the route's upstream, never by anthropic-version), and with a gateway key
    in any position only the gateway's own key for the route's upstream crosses."""
    proxy, secret = gateway
    expected: dict[str, tuple[str, dict[str, str]]] = {}
    number = 0
    with httpx.Client(base_url=proxy.url, timeout=30) as client:
        for case in ROUTES:
            for versioned, credentials, keyed in _mixes(secret):
                number += 1
                upstream = case.upstream or ("anthropic" if versioned else "openai")
                headers = {"x-test-case": str(number)}
                if versioned:
                    headers["anthropic-version"] = "2023-06-01"
                headers.update({k: v for k, v in credentials.items() if k != "?key"})
                params = {"key": credentials["?key"]} if "?key" in credentials else None
                content = None if case.body is None else json.dumps(case.body).encode()
                answer = client.request(
                    case.method, case.path, headers=headers, params=params, content=content
                )
                # Every call reached an upstream (GET /v1beta/models/M is the fake's 404).
                assert answer.status_code in {200, 404}, (case, credentials, answer.text)
                assert "ledger:" not in answer.text, (case, credentials, answer.text)
                if keyed is None:
                    own = {k: v for k, v in credentials.items() if k in ACCEPTED[upstream]}
                else:
                    header, value = GATEWAY_KEYS[upstream]
                    own = {header: value}
                expected[str(number)] = (upstream, own)
    arrived: dict[str, tuple[str, dict[str, str]]] = {}
    for name, server in upstreams.items():
        for sent in server.requests():
            case_number = sent["headers"]["x-test-case"]
            assert case_number not in arrived, f"case {case_number} reached two upstreams"
            arrived[case_number] = (name, _credentials_seen(sent))
            assert secret not in json.dumps(sent), f"a gateway key reached {name}"
    assert number == len(ROUTES) * 96
    wrong = {n: (arrived.get(n), want) for n, want in expected.items() if arrived.get(n) != want}
    assert not wrong, f"{len(wrong)} of {number} cases: {list(wrong.items())[:5]}"


def test_a_gateway_key_in_the_query_on_gemini_routes_never_reaches_google(gateway, upstreams):
    """?key=lk_… (Gemini's REST convention) is a gateway key: recognised, removed, the
    gateway's own key sent in x-goog-api-key instead, and absent from the gateway's log."""
    proxy, secret = gateway
    paths = [
        ("POST", "/v1beta/models/gemini-test:generateContent", GEMINI),
        ("POST", "/v1beta/models/gemini-test:streamGenerateContent", GEMINI),
        ("POST", "/v1beta/models/gemini-test:countTokens", GEMINI),
        ("GET", "/v1beta/models", None),
    ]
    for method, path, body in paths:
        answer = httpx.request(
            method, f"{proxy.url}{path}", params={"alt": "sse", "key": secret},
            content=None if body is None else json.dumps(body).encode(),
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
    sent = upstreams["google"].requests()
    assert [request["query"] for request in sent] == ["alt=sse"] * len(paths)
    assert {request["headers"]["x-goog-api-key"] for request in sent} == {"gw-google"}
    assert not any(server.requests() for name, server in upstreams.items() if name != "google")
    assert not any(secret in line for line in proxy.lines)
