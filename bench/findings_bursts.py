"""Findings on a $1 cap: bursts the fake bills by the providers' documented rules.

Each burst runs on its own fresh home with a $1 daily cap: the concurrent calls
go through one side's gateway to the fake in its ``bill`` scenario (it answers
at the whole output limit and bills what the documentation says), and the
figures are one request's estimate (the largest in the verdicts), the calls
the gateway let through, and what the fake billed for them, as % of the cap.
"""

import base64
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from findings_sides import Fake, Side, body_of, record_payloads, usd, verdict_payloads

from tests.fakes import billing
from tests.gateway.helpers import ANTHROPIC_HEADERS, micros
from tests.helpers.documents import blank_pdf_base64

CAP_MICROS = 1_000_000
BILL = {"x-test-scenario": "bill"}
GEMINI = {"x-goog-api-key": "AIza-bench", **BILL}
CLAUDE = {**ANTHROPIC_HEADERS, **BILL}


def _claude_bill(request: dict[str, Any]) -> int:
    usage = billing.anthropic_usage(request)
    return micros("anthropic/claude-test", usage["input_tokens"], usage["output_tokens"])


def _gemini_bill(request: dict[str, Any]) -> int:
    usage = billing.gemini_usage(request)
    return micros("google/gemini-test", usage["promptTokenCount"], usage["candidatesTokenCount"])


@dataclass(frozen=True)
class Burst:
    finding: str
    path: str
    body: bytes
    headers: dict[str, str]
    count: int
    bill: Callable[[dict[str, Any]], int]
    goal: str = "burst ≤ 100 % of the cap"


def _claude(content: object, **extra: object) -> bytes:
    body = {"model": "claude-test", "max_tokens": 1000,
            "messages": [{"role": "user", "content": content}], **extra}  # fmt: skip
    return json.dumps(body).encode()


def bursts() -> list[Burst]:
    gemini = {"system_instruction": {"parts": [{"text": "x" * 1_080_000}]},
              "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
              "generation_config": {"max_output_tokens": 1000}}  # fmt: skip
    fetch = _claude("read https://example.com",
                    tools=[{"type": "web_fetch_20250910", "name": "web_fetch"}])  # fmt: skip
    pdf = blank_pdf_base64(100)
    document = {"type": "document", "source": {"type": "base64",
                "media_type": "application/pdf", "data": pdf}}  # fmt: skip
    tool = {"name": "read", "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}  # fmt: skip
    clamped = json.loads(_claude("go on", tools=[tool]))
    clamped["max_tokens"] = 32_000
    kib = len(base64.b64decode(pdf)) / 1024
    return [
        Burst(
            "A1 Gemini system_instruction 1.08 MB, 6 at once",
            "/v1beta/models/gemini-test:generateContent",
            json.dumps(gemini).encode(),
            GEMINI,
            6,
            _gemini_bill,
        ),
        Burst(
            "A2 Claude web_fetch without max_uses, 8 at once",
            "/v1/messages",
            fetch,
            CLAUDE,
            8,
            _claude_bill,
        ),
        Burst(
            f"A3 Claude 100-page PDF ({kib:.1f} KiB), 6 at once",
            "/v1/messages",
            _claude([document]),
            CLAUDE,
            6,
            _claude_bill,
        ),
        Burst(
            "A4 40 clamped calls (32k output) with a tool",
            "/v1/messages",
            json.dumps(clamped).encode(),
            CLAUDE,
            40,
            _claude_bill,
        ),
    ]


def fire(url: str, bodies: list[bytes], headers: dict[str, str]) -> list[int]:
    """POST every body at once; their status codes."""

    def one(body: bytes) -> int:
        return httpx.post(url, content=body, headers=headers, timeout=180).status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(one, bodies))


def run_burst(burst: Burst, side: Side, root: Path, fake: Fake) -> tuple[str, int]:
    """The burst's cell for ``side`` and what the fake billed (micro-USD)."""
    home = side.home(root, fake.url, "1")
    mark = fake.mark()
    with side.gateway(home) as gateway:
        statuses = fire(f"{gateway.url}{burst.path}", [burst.body] * burst.count, burst.headers)
    sent = [body_of(request) for request in fake.since(mark)]
    billed = sum(burst.bill(request) for request in sent)
    estimates = [int(v.get("estimated_micros") or 0) for v in verdict_payloads(home)]
    recorded = sum(int(r.get("actual_micros") or 0) for r in record_payloads(home))
    others = sorted({code for code in statuses if code != 200})
    cell = (
        f"est {usd(max(estimates, default=0))}; {statuses.count(200)}/{burst.count} ok"
        f"{' (others ' + ','.join(map(str, others)) + ')' if others else ''}; "
        f"billed {usd(billed)} = {100 * billed / CAP_MICROS:.0f} % (recorded {usd(recorded)})"
    )
    return cell, billed
