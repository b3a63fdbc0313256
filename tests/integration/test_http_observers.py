"""observers/anthropic_cost.py and observers/openai_cost.py against a local fake API.

The fake server (127.0.0.1, an ephemeral port) speaks the documented response
formats: Anthropic ``GET /v1/organizations/cost_report`` (amounts are decimal
strings in cents) and OpenAI ``GET /v1/organization/costs`` (``amount.value``
in dollars, Unix-second buckets), both paginated with ``has_more`` /
``next_page``, and a fixed ``Date`` header. The observers run as real
subprocesses with the base-URL variables pointing at it.
"""

import datetime as dt
import email.utils
import json
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ledger.core.observation import Deferred, Reading, Unreachable, parse_observer_output
from ledger.edges.clock import FixedClock
from ledger.edges.observer import run_observer

REPO = Path(__file__).resolve().parents[2]
ANTHROPIC = REPO / "observers" / "anthropic_cost.py"
OPENAI = REPO / "observers" / "openai_cost.py"

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
SERVER_NOW = dt.datetime(2026, 3, 1, 12, 0, 5, tzinfo=dt.UTC)
TODAY = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
YESTERDAY = TODAY - dt.timedelta(days=1)
TOMORROW = TODAY + dt.timedelta(days=1)
ANTHROPIC_KEY = "sk-ant-admin01-test"
OPENAI_KEY = "sk-admin-test"
ANTHROPIC_CURSOR = "page_MjAyNi0wMy0wMVQwMDowMDowMFo="
OPENAI_CURSOR = "page_AAAAAGdGxdEiJdKOAAAAAGcqsYA="


def rfc3339(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def unix(moment: dt.datetime) -> int:
    return int(moment.timestamp())


def anthropic_item(cents: str, description: str = "Claude Sonnet 4 Usage - Input Tokens"):
    return {
        "currency": "USD",
        "amount": cents,
        "workspace_id": None,
        "description": description,
        "cost_type": "tokens",
        "context_window": "0-200k",
        "model": "claude-sonnet-4-20250514",
        "service_tier": "standard",
        "token_type": "uncached_input_tokens",
    }


def anthropic_bucket(start: dt.datetime, items: list[dict[str, Any]]):
    return {
        "starting_at": rfc3339(start),
        "ending_at": rfc3339(start + dt.timedelta(days=1)),
        "results": items,
    }


# Page 1 holds yesterday (must not count) and part of today; page 2 the rest of today.
ANTHROPIC_PAGES = {
    None: {
        "data": [
            anthropic_bucket(YESTERDAY, [anthropic_item("5000")]),
            anthropic_bucket(TODAY, [anthropic_item("123.78912"), anthropic_item("0.5")]),
        ],
        "has_more": True,
        "next_page": ANTHROPIC_CURSOR,
    },
    ANTHROPIC_CURSOR: {
        "data": [anthropic_bucket(TODAY, [anthropic_item("1000", "Web search")])],
        "has_more": False,
        "next_page": None,
    },
}
ANTHROPIC_TODAY_USD = "11.2428912"  # (123.78912 + 0.5 + 1000) cents


def openai_bucket(start: dt.datetime, values: list[str]):
    # values are written as JSON number literals, exactly as given
    results = ",".join(
        '{"object": "organization.costs.result", "amount": {"value": '
        + value
        + ', "currency": "usd"}, "line_item": null, "project_id": null}'
        for value in values
    )
    return (
        f'{{"object": "bucket", "start_time": {unix(start)},'
        f' "end_time": {unix(start + dt.timedelta(days=1))}, "results": [{results}]}}'
    )


OPENAI_PAGES = {
    None: (
        '{"object": "page", "data": ['
        + openai_bucket(YESTERDAY, ["7.5"])
        + ","
        + openai_bucket(TODAY, ["0.06", "1.234567891"])
        + f'], "has_more": true, "next_page": "{OPENAI_CURSOR}"}}'
    ),
    OPENAI_CURSOR: (
        '{"object": "page", "data": ['
        + openai_bucket(TODAY, ["0.1"])
        + '], "has_more": false, "next_page": null}'
    ),
}
OPENAI_TODAY_USD = "1.394567891"  # 0.06 + 1.234567891 + 0.1, exactly


@dataclass
class FakeApi:
    """What the fake server answers, and what it was asked."""

    status: int | None = None  # force this status on every request
    body: bytes | None = None  # force this body (with status 200)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


class Handler(BaseHTTPRequestHandler):
    api: FakeApi

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def date_time_string(self, _timestamp: float | None = None) -> str:
        return email.utils.format_datetime(SERVER_NOW, usegmt=True)

    def send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def error(self, status: int, kind: str, message: str) -> None:
        self.send(status, json.dumps({"error": {"type": kind, "message": message}}).encode())

    def do_GET(self) -> None:
        api = self.server.api  # type: ignore[attr-defined]
        split = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(split.query))
        api.requests.append({"path": split.path, "query": query, "headers": dict(self.headers)})
        if api.status == 302:
            self.send(302, b"", {"Location": f"{api.url}/elsewhere"})
            return
        if api.status is not None:
            self.error(api.status, "forced", f"forced status {api.status}")
            return
        if api.body is not None:
            self.send(200, api.body)
            return
        if split.path == "/v1/organizations/cost_report":
            self.anthropic(query)
        elif split.path == "/v1/organization/costs":
            self.openai(query)
        else:
            self.error(404, "not_found_error", "no such endpoint")

    def anthropic(self, query: dict[str, str]) -> None:
        if self.headers.get("x-api-key") != ANTHROPIC_KEY:
            self.error(401, "authentication_error", "invalid x-api-key")
            return
        if self.headers.get("anthropic-version") != "2023-06-01":
            self.error(400, "invalid_request_error", "anthropic-version header required")
            return
        if query.get("starting_at") != rfc3339(TODAY) or query.get("bucket_width") != "1d":
            self.error(400, "invalid_request_error", f"unexpected query {query}")
            return
        page = ANTHROPIC_PAGES.get(query.get("page"))
        if page is None:
            self.error(400, "invalid_request_error", "bad page")
            return
        self.send(200, json.dumps(page).encode())

    def openai(self, query: dict[str, str]) -> None:
        if self.headers.get("Authorization") != f"Bearer {OPENAI_KEY}":
            self.error(401, "invalid_request_error", "Incorrect API key provided")
            return
        if query.get("start_time") != str(unix(TODAY)) or query.get("bucket_width") != "1d":
            self.error(400, "invalid_request_error", f"unexpected query {query}")
            return
        page = OPENAI_PAGES.get(query.get("page"))
        if page is None:
            self.error(400, "invalid_request_error", "bad page")
            return
        self.send(200, page.encode())


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def api(server: ThreadingHTTPServer) -> FakeApi:
    """Fresh behaviour and request log for each test, on the module's server."""
    state = FakeApi(url=f"http://127.0.0.1:{server.server_address[1]}")
    server.api = state  # type: ignore[attr-defined]
    return state


def observer_env(base: str, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "LEDGER_OBSERVER_NOW": rfc3339(NOW),
        "LEDGER_OBSERVER_HTTP_TIMEOUT": "10",
        "ANTHROPIC_ADMIN_KEY": ANTHROPIC_KEY,
        "ANTHROPIC_API_BASE": base,
        "OPENAI_ADMIN_KEY": OPENAI_KEY,
        "OPENAI_API_BASE": base,
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v}


def run_script(script: Path, env: dict[str, str], provider: str = "aggregate") -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(script), provider],
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, proc.stdout
    parsed = parse_observer_output(provider, proc.stdout, NOW)
    assert not (isinstance(parsed, Unreachable) and "malformed" in parsed.reason)
    out: dict[str, Any] = json.loads(lines[0])
    return out


def raw_usd(script: Path, env: dict[str, str]) -> str:
    """The usd_used number exactly as printed."""
    out = subprocess.run(
        [sys.executable, str(script), "aggregate"], capture_output=True, env=env, check=True
    ).stdout.decode()
    return out.split('"usd_used": ', 1)[1].split(",", 1)[0]


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


SCRIPTS = [
    pytest.param(ANTHROPIC, ANTHROPIC_TODAY_USD, 11_242_892, id="anthropic"),
    pytest.param(OPENAI, OPENAI_TODAY_USD, 1_394_568, id="openai"),
]


@pytest.mark.parametrize(("script", "usd", "micros"), SCRIPTS)
def test_sums_today_across_two_pages(api, script, usd, micros):
    out = run_script(script, observer_env(api.url))
    assert out == {
        "usd_used": float(usd),
        "billing_ts": "2026-03-01T12:00:05.000000Z",  # open bucket: capped at the server's Date
        "server_ts": "2026-03-01T12:00:05.000000Z",
    }
    api.requests.clear()
    assert raw_usd(script, observer_env(api.url)) == usd  # exact decimal, no float noise
    assert len(api.requests) == 2
    first, second = api.requests
    assert "page" not in first["query"]
    assert second["query"]["page"] in {ANTHROPIC_CURSOR, OPENAI_CURSOR}
    reading = parse_observer_output("aggregate", json.dumps(out).encode(), NOW)
    assert isinstance(reading, Reading)
    exact = parse_observer_output(
        "aggregate",
        f'{{"usd_used": {usd}, "billing_ts": "{out["billing_ts"]}"}}'.encode(),
        NOW,
    )
    assert isinstance(exact, Reading)
    assert exact.usd_used_micros == micros


def test_anthropic_request_follows_the_docs(api):
    run_script(ANTHROPIC, observer_env(api.url))
    request = api.requests[0]
    assert request["path"] == "/v1/organizations/cost_report"
    assert request["query"] == {"starting_at": "2026-03-01T00:00:00Z", "bucket_width": "1d"}
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["x-api-key"] == ANTHROPIC_KEY
    assert headers["anthropic-version"] == "2023-06-01"


def test_openai_request_follows_the_docs(api):
    run_script(OPENAI, observer_env(api.url))
    request = api.requests[0]
    assert request["path"] == "/v1/organization/costs"
    assert request["query"] == {"start_time": str(unix(TODAY)), "bucket_width": "1d"}
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["authorization"] == f"Bearer {OPENAI_KEY}"


@pytest.mark.parametrize(("script", "usd", "micros"), SCRIPTS)
def test_billing_ts_start_mode(api, script, usd, micros):
    out = run_script(script, observer_env(api.url, LEDGER_OBSERVER_BILLING_TS="start"))
    assert out["billing_ts"] == "2026-03-01T00:00:00.000000Z"
    assert out["server_ts"] == "2026-03-01T12:00:05.000000Z"


@pytest.mark.parametrize(("script", "usd", "micros"), SCRIPTS)
def test_base_url_with_v1_suffix(api, script, usd, micros):
    out = run_script(script, observer_env(f"{api.url}/v1/"))
    assert out["usd_used"] == float(usd)


@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_rate_limited_defers(api, script):
    api.status = 429
    assert run_script(script, observer_env(api.url)) == {"_defer": True, "_reason": "rate_limited"}


@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_wrong_key_is_unreachable(api, script):
    env = observer_env(api.url, ANTHROPIC_ADMIN_KEY="sk-ant-wrong", OPENAI_ADMIN_KEY="sk-wrong")
    out = run_script(script, env)
    assert out["_unreachable"] is True
    assert out["_reason"].startswith("HTTP 401")
    assert "wrong" not in out["_reason"]  # the key never appears in the reason


@pytest.mark.parametrize("status", [403, 404, 500, 503])
@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_error_statuses_are_unreachable(api, script, status):
    api.status = status
    out = run_script(script, observer_env(api.url))
    assert out == {"_unreachable": True, "_reason": out["_reason"]}
    assert out["_reason"].startswith(f"HTTP {status}")


@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_connection_refused_is_unreachable(script):
    out = run_script(script, observer_env(closed_port_url()))
    assert out["_unreachable"] is True
    assert out["_reason"].startswith("network error")


@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_missing_key_is_unreachable(api, script):
    out = run_script(script, observer_env(api.url, ANTHROPIC_ADMIN_KEY="", OPENAI_ADMIN_KEY=""))
    assert out["_unreachable"] is True
    assert "ADMIN_KEY is not set" in out["_reason"]
    assert api.requests == []


@pytest.mark.parametrize(
    "body",
    [
        b"<html>bad gateway</html>",
        b"[]",
        b'{"data": "nope"}',
        b'{"data": [{"starting_at": "x", "results": 5}], "has_more": false}',
        b'{"data": [], "has_more": true, "next_page": null}',
    ],
)
@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_unparseable_body_is_unreachable(api, script, body):
    api.body = body
    out = run_script(script, observer_env(api.url))
    assert out["_unreachable"] is True
    assert out["_reason"].startswith("unexpected response")


@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_redirect_is_not_followed(api, script):
    api.status = 302
    out = run_script(script, observer_env(api.url))
    assert out["_unreachable"] is True
    assert len(api.requests) == 1  # the admin key was not sent on to the Location


@pytest.mark.parametrize("script", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_no_cost_today(api, script):
    api.body = b'{"data": [], "has_more": false, "next_page": null}'
    out = run_script(script, observer_env(api.url))
    assert out == {
        "usd_used": 0,
        "billing_ts": "2026-03-01T12:00:05.000000Z",
        "server_ts": "2026-03-01T12:00:05.000000Z",
    }


def test_wrong_currency_is_unreachable(api):
    api.body = json.dumps(
        {
            "data": [
                {
                    "starting_at": rfc3339(TODAY),
                    "ending_at": rfc3339(TOMORROW),
                    "results": [{"currency": "EUR", "amount": "100"}],
                }
            ],
            "has_more": False,
            "next_page": None,
        }
    ).encode()
    out = run_script(ANTHROPIC, observer_env(api.url))
    assert out["_unreachable"] is True
    assert "EUR" in out["_reason"]


@pytest.mark.parametrize(
    ("script", "provider"), [(ANTHROPIC, "anthropic"), (OPENAI, "openai")], ids=["a", "o"]
)
def test_through_run_observer(api, monkeypatch, script, provider):
    for key, value in observer_env(api.url).items():
        if key != "PATH":
            monkeypatch.setenv(key, value)
    result = run_observer((sys.executable, str(script)), provider, 20, FixedClock(NOW))
    assert isinstance(result, Reading)
    assert result.provider == provider
    assert result.server_ts == SERVER_NOW
    assert result.billing_ts == SERVER_NOW
    assert result.fetched_at == NOW
    api.status = 429
    deferred = run_observer((sys.executable, str(script)), provider, 20, FixedClock(NOW))
    assert deferred == Deferred(provider, "rate_limited", NOW)
