"""Credential and counting findings: which key reached the fake, what a gateway key may claim.

One keyed home per side: a gateway key issued (``keys issue``), the gateway
holding its own key for each provider (``gw-anthropic``, ``gw-google``,
``gw-openai``), Google's OpenAI-compatible endpoint and an Ollama-like server
as configured providers. A second home per side requires gateway keys and has
$0.05 per-agent and per-session budgets.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from findings_sides import Fake, Side, record_payloads, usd, wait_records

from tests.gateway.helpers import anthropic_body

ENVIRON = {"ANTHROPIC_API_KEY": "gw-anthropic", "GEMINI_API_KEY": "gw-google",
           "OPENAI_API_KEY": "gw-openai", "GOOGLE_OPENAI_KEY": "gw-google-openai"}  # fmt: skip
NAMES = {value: name for name, value in ENVIRON.items()}
GEMINI = {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 10}}
CHAT = {"model": "llama-test", "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
PROVIDERS = (
    '[proxy.providers.gemini]\nurl = "{url}/v1beta/openai"\nkey_env = "GOOGLE_OPENAI_KEY"\n\n'
    '[proxy.providers.ollama]\nurl = "{url}"\n\n'
    '[prices."gemini/llama-test"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n\n'
    '[prices."ollama/llama-test"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
)
BUDGETS = (
    "\n[proxy]\nrequire_keys = true\n\n"
    '[[budgets]]\nname = "per-agent"\nusd = 0.05\nperiod = "day"\nper = "agent"\n\n'
    '[[budgets]]\nname = "per-session"\nusd = 0.05\nperiod = "day"\nper = "session"\n'
)


@dataclass
class Keyed:
    url: str
    home: Path
    fake: Fake
    secret: str


@dataclass(frozen=True)
class Check:
    finding: str
    goal: str
    run: Callable[[Keyed], str]


def _keys_seen(sent: dict[str, Any], secret: str) -> str:
    headers = sent["headers"]
    values = [headers.get(name, "") for name in ("x-api-key", "x-goog-api-key", "authorization")]
    values.append(sent["query"])
    if any(secret in value for value in values):
        return "the gateway key"
    names = [NAMES[value.removeprefix("Bearer ")] for value in values
             if value.removeprefix("Bearer ") in NAMES]  # fmt: skip
    return "+".join(names) or "none"


def free_gemini_routes(place: Keyed) -> str:
    """The free Gemini routes with a gateway key and an ``anthropic-version`` header."""
    headers = {"x-goog-api-key": place.secret, "anthropic-version": "2023-06-01"}
    routes = [("GET", "/v1beta/models", None), ("GET", "/v1beta/models/gemini-test", None),
              ("POST", "/v1beta/models/gemini-test:countTokens", GEMINI)]  # fmt: skip
    seen = []
    for method, path, body in routes:
        mark = place.fake.mark()
        content = None if body is None else json.dumps(body).encode()
        answer = httpx.request(method, f"{place.url}{path}", headers=headers, content=content)
        sent = place.fake.since(mark)
        where = _keys_seen(sent[0], place.secret) if sent else f"not sent ({answer.status_code})"
        seen.append(f"{path.rsplit('/', 1)[1]}: {where}")
    return "; ".join(seen)


def key_in_query(place: Keyed) -> str:
    """A gateway key as ``?key=`` (Gemini's REST convention) on a model call and a list."""
    seen = []
    for method, path, body in (("POST", "/v1beta/models/gemini-test:generateContent", GEMINI),
                               ("GET", "/v1beta/models", None)):  # fmt: skip
        mark = place.fake.mark()
        content = None if body is None else json.dumps(body).encode()
        answer = httpx.request(method, f"{place.url}{path}", params={"key": place.secret},
                               content=content)  # fmt: skip
        sent = place.fake.since(mark)
        if not sent:
            seen.append(f"not sent ({answer.status_code})")
        else:
            forwarded = place.secret in json.dumps(sent[0])
            seen.append(f"{'FORWARDED' if forwarded else 'not forwarded'} ({answer.status_code})")
    return "; ".join(seen)


def openai_base_url(place: Keyed) -> str:
    """Google's OpenAI endpoint as the SDK's base URL (``.../v1beta/openai``)."""
    mark = place.fake.mark()
    answer = httpx.post(f"{place.url}/gemini/v1/chat/completions", json=CHAT,
                        headers={"authorization": "Bearer sk-caller"}, timeout=60)  # fmt: skip
    sent = place.fake.since(mark)
    return f"HTTP {answer.status_code}, upstream {sent[0]['path'] if sent else 'none'}"


def repeated_ids(place: Keyed) -> str:
    """Six distinct calls answered with one id (``chatcmpl-7``), as Ollama reuses its ids."""
    before = len(record_payloads(place.home))
    headers = {"authorization": "Bearer sk-ollama", "x-test-response-id": "7"}
    for number in range(6):
        body = {**CHAT, "messages": [{"role": "user", "content": f"question {number}"}]}
        httpx.post(f"{place.url}/ollama/v1/chat/completions", json=body, headers=headers)
    counted = wait_records(place.home, before + 6, timeout=5)[before:]
    return f"{len(counted)} of 6 counted"


def checks() -> list[Check]:
    return [
        Check(
            "C free Gemini routes + anthropic-version: key at Google",
            "GEMINI_API_KEY on each",
            free_gemini_routes,
        ),
        Check("C gateway key as ?key=lk_…", "not forwarded", key_in_query),
        Check(
            "C Gemini via OpenAI SDK base URL …/v1beta/openai",
            "200, /v1beta/openai/chat/completions",
            openai_base_url,
        ),
        Check("C repeated response ids (chatcmpl-7)", "6 of 6 counted", repeated_ids),
    ]


def run_checks(side: Side, root: Path, fake: Fake) -> dict[str, str]:
    """Every check's cell for ``side``, on one keyed home."""
    home = side.home(root, fake.url, "100", PROVIDERS.format(url=fake.url))
    secret = json.loads(side.ledger(home, "keys", "issue", "bench").stdout)["key"]
    cells = {}
    with side.gateway(home, **ENVIRON) as gateway:
        place = Keyed(gateway.url, home, fake, secret)
        for check in checks():
            cells[check.finding] = check.run(place)
    return cells


PER_AGENT_FINDING = "C unbound key claiming 20 agents + sessions"


def per_agent(side: Side, root: Path, fake: Fake) -> str:
    """A key issued without --agent naming a new agent and session on each of 20 calls."""
    home = side.home(root, fake.url, "100", BUDGETS)
    secret = json.loads(side.ledger(home, "keys", "issue", "loose").stdout)["key"]
    statuses = []
    with side.gateway(home, ANTHROPIC_API_KEY="gw-anthropic") as gateway:
        for number in range(20):
            headers = {"x-api-key": secret, "anthropic-version": "2023-06-01",
                       "x-ledger-agent": f"a{number}", "x-ledger-session": f"s{number}"}  # fmt: skip
            answer = httpx.post(f"{gateway.url}/v1/messages", content=anthropic_body(),
                                headers=headers, timeout=60)  # fmt: skip
            statuses.append(answer.status_code)
    spent = sum(int(r.get("actual_micros") or 0) for r in record_payloads(home))
    codes = ", ".join(f"{statuses.count(code)}×{code}" for code in sorted(set(statuses)))
    return f"spent {usd(spent)} ({codes})"
