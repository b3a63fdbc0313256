"""The console's JSON endpoints, its sign-in and who may see what, against real processes.

One home, one fake provider, one gateway and one console for the module: calls
go through the real gateway with gateway keys; the console is asked over HTTP.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import clean_env, run_process
from tests.console.helpers import Stack, start_console, start_stack, stop_stack
from tests.gateway.helpers import NOW, records

GET_API = ["overview", "spend", "calls", "keys", "alerts", "integrity", "me"]
PAGES = ["/console/", "/console/live", "/console/spend", "/console/calls", "/console/keys",
         "/console/alerts", "/console/integrity", "/console/me"]  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = start_stack(tmp_path_factory.mktemp("console") / "home")
    try:
        for _ in range(3):
            assert running.call(running.secrets["alice"]).status_code == 200
        assert running.call(running.secrets["bob"]).status_code == 200
        yield running
    finally:
        stop_stack(running)


def bearer(stack: Stack, name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {stack.secrets[name]}"}


def get(stack: Stack, path: str, who: str | None = None, **params: str) -> httpx.Response:
    headers = bearer(stack, who) if who else {}
    return httpx.get(f"{stack.console.url}{path}", headers=headers, params=params, timeout=30,
                     follow_redirects=False)  # fmt: skip


def api(stack: Stack, name: str, who: str = "lead", **params: str) -> dict[str, Any]:
    answer = get(stack, f"/console/api/{name}", who, **params)
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def test_every_answer_carries_the_security_headers(stack):
    """CSP without inline script or style, nosniff, no-referrer: on pages, refusals and files."""
    for path in ("/console/login", "/console/api/overview", "/console/static/console.js"):
        answer = get(stack, path)
        csp = answer.headers["content-security-policy"]
        assert "default-src 'self'" in csp, path
        assert "frame-ancestors 'none'" in csp, path
        assert "unsafe-inline" not in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"


def test_auth_matrix(stack):
    """No credential: 401 (pages redirect to sign-in); viewer and admin see every view but Me;
    a gateway key sees Me only (403 elsewhere); only an admin changes keys."""
    expected = {
        None: dict.fromkeys(GET_API, 401),
        "watcher": {**dict.fromkeys(GET_API, 200), "me": 403},
        "lead": {**dict.fromkeys(GET_API, 200), "me": 403},
        "alice": {**dict.fromkeys(GET_API, 403), "me": 200},
    }
    for who, codes in expected.items():
        for name, code in codes.items():
            assert get(stack, f"/console/api/{name}", who).status_code == code, (who, name)
        live = get(stack, "/console/api/explain/" + "0" * 64, who)
        assert live.status_code == {None: 401, "alice": 403}.get(who, 404), who
    for page in PAGES:
        answer = get(stack, page)
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/login"), page
    posts = [("/console/api/keys", {"name": "nope"}), ("/console/api/keys/bob/revoke", {}),
             ("/console/api/integrity", {})]  # fmt: skip
    for path, body in posts:
        for who, code in ((None, 401), ("watcher", 403), ("alice", 403)):
            headers = bearer(stack, who) if who else {}
            answer = httpx.post(f"{stack.console.url}{path}", json=body, headers=headers)
            assert answer.status_code == code, (path, who)
    wrong = {"authorization": "Bearer lk_" + "A" * 43}
    assert httpx.get(f"{stack.console.url}/console/api/keys", headers=wrong).status_code == 401


def test_the_one_time_token_signs_in_once_with_a_strict_cookie(stack):
    """The printed token signs in (HttpOnly, SameSite=Strict); used again it is refused;
    a cookie-authenticated POST needs the page's CSRF token."""
    first = httpx.get(f"{stack.console.url}/console/login", params={"token": stack.console.token})
    assert first.status_code == 303
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/console" in cookie
    again = httpx.get(f"{stack.console.url}/console/login", params={"token": stack.console.token})
    assert again.status_code == 401
    with httpx.Client(base_url=stack.console.url, cookies=first.cookies) as browser:
        page = browser.get("/console/keys")
        assert page.status_code == 200
        csrf = page.text.split('<meta name="csrf-token" content="')[1].split('"')[0]
        assert len(csrf) > 20
        assert browser.post("/console/api/integrity").status_code == 403
        started = browser.post("/console/api/integrity", headers={"x-csrf-token": csrf})
        assert started.status_code == 202
        assert browser.post("/console/logout", data={"csrf_token": csrf}).status_code == 303
        assert browser.get("/console/api/overview").status_code == 401


def test_overview_equals_status_json(stack):
    """The overview's figures are `ledger status --json`'s, to the micro-dollar."""
    status = stack.ledger("status", "--json")
    overview = api(stack, "overview")
    assert overview["status"]["usd"]["caps"][0]["usd_used_micros"] > 0
    for mine, theirs in zip(overview["status"]["usd"]["caps"], status["usd"]["caps"], strict=True):
        for key in ("scope", "cap_micros", "usd_used_micros", "usd_reserved_micros", "usage_pct"):
            assert mine[key] == theirs[key], key
    assert overview["chain"]["entries"] == len(
        (stack.home / "events.jsonl").read_text().splitlines()
    )
    assert overview["timezone"] == "UTC"
    # cents an hour against $100: the cap is not reached before the day resets
    assert overview["burn_rate_per_hour"]["micros"] > 0
    assert overview["status"]["usd"]["caps"][0]["cap_reached_at"] is None
    assert overview["status"]["usd"]["caps"][0]["resets_at"] == "2026-06-02T00:00:00.000000Z"


def test_calls_filters_and_cursor(stack):
    """Calls newest first, filtered by key, tag, provider, verdict and time; paged by cursor."""
    every = api(stack, "calls", limit="1000")["calls"]
    assert len(every) == 4
    assert [c["line"] for c in every] == sorted((c["line"] for c in every), reverse=True)
    assert all(c["actual_micros"] > 0 and c["record_ref"] for c in every)
    assert {c["key"] for c in api(stack, "calls", key="alice")["calls"]} == {"alice"}
    assert len(api(stack, "calls", key="alice")["calls"]) == 3
    assert [c["key"] for c in api(stack, "calls", tag="team:b")["calls"]] == ["bob"]
    assert api(stack, "calls", provider="openai")["calls"] == []
    assert len(api(stack, "calls", verdict="allow")["calls"]) == 4
    assert api(stack, "calls", verdict="halt-100")["calls"] == []
    assert api(stack, "calls", **{"from": "2026-06-02"})["calls"] == []
    assert len(api(stack, "calls", **{"from": "2026-06-01", "to": "2026-06-01"})["calls"]) == 4
    page = api(stack, "calls", limit="3")
    assert len(page["calls"]) == 3
    assert page["next_cursor"] is not None
    rest = api(stack, "calls", limit="3", cursor=str(page["next_cursor"]))
    assert [c["line"] for c in page["calls"] + rest["calls"]] == [c["line"] for c in every]
    assert len(api(stack, "calls", model="claude-test", key="alice")["calls"]) == 3
    # A key issued without --agent makes its calls as its own name's agent.
    assert len(api(stack, "calls", agent="alice")["calls"]) == 3
    assert api(stack, "calls", agent="nobody")["calls"] == []
    for bad in ({"verdict": "maybe"}, {"by": "colour"}, {"from": "yesterday"}, {"limit": "0"},
                {"cursor": "x"}):  # fmt: skip
        answer = get(stack, "/console/api/calls", "lead", **bad)
        assert (answer.status_code, bool(answer.json()["error"])) == (400, True), bad


def test_spend_by_dimension_sums_the_records(stack):
    """Spend by key over today sums every record's actual micro-USD; by tag counts each tag."""
    total = sum(r["actual_micros"] for r in records(stack.home))
    by_key = api(stack, "spend", by="key")
    assert by_key["total"]["micros"] == total
    assert {g["value"]: g["calls"] for g in by_key["groups"]} == {"alice": 3, "bob": 1}
    assert sum(g["micros"] for g in by_key["groups"]) == total
    by_tag = api(stack, "spend", by="tag")
    assert {g["value"] for g in by_tag["groups"]} == {"team:b", ""}
    only_bob = api(stack, "spend", by="model", key="bob")
    assert [g["calls"] for g in only_bob["groups"]] == [1]
    assert (
        api(stack, "spend", by="agent", **{"from": "2026-05-01", "to": "2026-05-31"})["groups"]
        == []
    )


def test_a_key_holder_sees_its_own_figures_only(stack):
    """Me shows the key's own spend and caps; asking about another key is refused (403)."""
    mine = api(stack, "me", "alice")
    spent = sum(r["actual_micros"] for r in records(stack.home) if r.get("key") == "alice")
    assert (mine["key"], mine["spend"]["day"]["micros"]) == ("alice", spent)
    assert mine["caps"][0]["scope"] == "aggregate"
    assert get(stack, "/console/api/me", "alice", key="bob").status_code == 403
    assert get(stack, "/console/api/calls", "alice", key="alice").status_code == 403


def test_keys_issued_and_revoked_through_the_api(stack):
    """Issue answers 201 with the secret once; the gateway takes the key until it is revoked;
    a console key is never a gateway key; viewers may not issue."""
    made = httpx.post(f"{stack.console.url}/console/api/keys", headers=bearer(stack, "lead"),
                      json={"name": "carol", "agent": "carol-bot", "tags": ["t1"]})  # fmt: skip
    assert made.status_code == 201, made.text
    secret = made.json()["key"]
    assert secret.startswith("lk_")
    assert made.json()["role"] == "gateway"
    assert secret not in json.dumps(api(stack, "keys"))
    assert stack.call(secret).status_code == 200
    twice = httpx.post(f"{stack.console.url}/console/api/keys", headers=bearer(stack, "lead"),
                       json={"name": "carol"})  # fmt: skip
    assert twice.status_code == 409
    revoked = httpx.post(f"{stack.console.url}/console/api/keys/carol/revoke",
                         headers=bearer(stack, "lead"))  # fmt: skip
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked"
    assert stack.call(secret).status_code == 401
    assert stack.call(stack.secrets["lead"]).status_code == 401  # a console key
    viewer = httpx.post(f"{stack.console.url}/console/api/keys", headers=bearer(stack, "watcher"),
                        json={"name": "dave"})  # fmt: skip
    assert viewer.status_code == 403
    roles = {k["name"]: k["role"] for k in stack.ledger("keys", "list")["keys"]}
    assert roles == {"lead": "admin", "watcher": "viewer", "alice": "gateway", "bob": "gateway",
                     "carol": "gateway"}  # fmt: skip
    bad = httpx.post(f"{stack.console.url}/console/api/keys", headers=bearer(stack, "lead"),
                     json={"name": "Bad Name", "role": "root"})  # fmt: skip
    assert bad.status_code == 400


def test_the_live_feed_sends_each_sealed_verdict_and_record(stack):
    """`/console/api/live` is text/event-stream with one data: JSON object per entry."""
    with httpx.stream("GET", f"{stack.console.url}/console/api/live",
                      headers=bearer(stack, "lead"), timeout=30) as feed:  # fmt: skip
        assert feed.headers["content-type"].startswith("text/event-stream")
        assert stack.call(stack.secrets["bob"]).status_code == 200
        events = []
        for line in feed.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
            if len(events) == 2:
                break
    assert [e["kind"] for e in events] == ["verdict", "record"]
    assert events[0]["key"] == "bob"
    assert events[0]["verdict"] == "allow"
    assert events[1]["verdict_ref"] == events[0]["verdict_ref"]


def test_explain_and_proof_of_a_call(stack):
    """Each call's explain and inclusion proof are one request away."""
    ref = api(stack, "calls", limit="1")["calls"][0]["verdict_ref"]
    explained = api(stack, f"explain/{ref}")
    assert explained["verdict_ref"] == ref
    stack.ledger("checkpoint")
    assert api(stack, f"proof/{ref}")["entry_hash"] == ref


def test_failed_sign_ins_are_rate_limited(stack):
    """Five wrong keys from one address, then even the right one waits (429)."""
    console = start_console(stack.home)
    try:
        for _ in range(5):
            wrong = httpx.post(f"{console.url}/console/login", data={"key": "lc_" + "B" * 43})
            assert wrong.status_code == 401
        right = httpx.post(f"{console.url}/console/login", data={"key": stack.secrets["lead"]})
        assert right.status_code == 429
    finally:
        console.stop()


@pytest.mark.parametrize(
    ("config", "args"),
    [
        ("", ["--listen", "0.0.0.0:0"]),
        ('[console]\nlisten = "0.0.0.0:0"\n', []),
        ("[console]\nsession_hours = 0\n", []),
        ('[console]\ntimezone = "Mars/Olympus"\n', []),
        ('[console]\ntls_certfile = "/nonexistent.pem"\n', []),
        ("[console]\ncolour = 1\n", []),
    ],
)
def test_refused_settings_exit_78(tmp_path: Path, run_inproc, config: str, args: list[str]):
    """Beyond loopback without TLS or behind_proxy, or a bad console key: exit 78, one line.

    In-process: the refusal comes before anything listens, and a traceback would fail
    the test as surely as it would show in a process's stderr.
    """
    home = tmp_path / "home"
    env = {"LEDGER_NOW": NOW}
    assert run_inproc(["--home", str(home), "init", "--daily-cap-usd", "1"], env).code == 0
    with (home / "ledger.toml").open("a") as toml:
        toml.write("\n" + config)
    result = run_inproc(["--home", str(home), "console", *args], env)
    assert result.code == 78, result.stderr
    assert result.stderr.startswith("ledger: ")
    assert "Traceback" not in result.stderr


def test_the_gateway_answers_a_key_its_own_figures(stack):
    """`GET /v1/ledger/me` on the gateway: the Me page's data, the gateway key as credential."""
    url = f"{stack.proxy.url}/v1/ledger/me"
    mine = httpx.get(url, headers={"authorization": f"Bearer {stack.secrets['alice']}"})
    assert mine.status_code == 200, mine.text
    assert mine.json()["spend"] == api(stack, "me", "alice")["spend"]
    assert mine.json()["key"] == "alice"
    also = httpx.get(url, headers={"x-api-key": stack.secrets["alice"]})
    assert also.json()["spend"] == mine.json()["spend"]
    for headers in ({}, {"x-api-key": stack.secrets["lead"]}, {"x-api-key": "lk_" + "C" * 43}):
        refused = httpx.get(url, headers=headers)
        assert refused.status_code == 401, headers
        assert refused.json()["error"]


def test_each_call_carries_its_client(stack):
    """The gateway seals the client its User-Agent names; Calls and Spend filter and group by it."""
    sent = stack.call(stack.secrets["bob"], **{"user-agent": "claude-cli/2.1.197 (external, cli)"})
    assert sent.status_code == 200
    (row,) = api(stack, "calls", client="claude-code")["calls"]
    assert row["key"] == "bob"
    groups = {g["value"]: g["calls"] for g in api(stack, "spend", by="client")["groups"]}
    assert groups["claude-code"] == 1
    assert groups["python-httpx"] >= 4
    lines = (stack.home / "events.jsonl").read_text().splitlines()
    sealed = [e["payload"] for e in map(json.loads, lines) if e["event_type"] == "budget.allow"]
    assert {p.get("client") for p in sealed} >= {"claude-code", "python-httpx"}


def test_a_session_ends_when_its_key_is_revoked(stack):
    """A browser signed in with a console key is signed out the moment the key is revoked."""
    made = httpx.post(f"{stack.console.url}/console/api/keys", headers=bearer(stack, "lead"),
                      json={"name": "temp-viewer", "role": "viewer"})  # fmt: skip
    assert made.status_code == 201
    assert made.json()["key"].startswith("lc_")
    signed = httpx.post(f"{stack.console.url}/console/login", data={"key": made.json()["key"]})
    assert signed.status_code == 303
    with httpx.Client(base_url=stack.console.url, cookies=signed.cookies) as browser:
        assert browser.get("/console/api/overview").status_code == 200
        revoked = httpx.post(f"{stack.console.url}/console/api/keys/temp-viewer/revoke",
                             headers=bearer(stack, "lead"))  # fmt: skip
        assert revoked.status_code == 200
        assert browser.get("/console/api/overview").status_code == 401


def test_keys_issue_refuses_an_unknown_role(stack):
    """`keys issue --role` takes admin or viewer only (exit 2, one line)."""
    result = run_process(["--home", str(stack.home), "keys", "issue", "x", "--role", "root"],
                         clean_env(LEDGER_NOW=NOW))  # fmt: skip
    assert result.code == 2
    assert result.stderr.startswith("ledger: --role: 'root' must be admin or viewer")
