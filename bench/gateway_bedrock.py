"""The gateway on a Bedrock stream beside an Anthropic stream: what each adds (a bench_gateway row).

Two local upstreams: the Anthropic-shaped one of ``bench_gateway`` and the
tests' fake Bedrock runtime (``tests/fakes/clouds.py``: a stream answered in
AWS event-stream frames, every request's SigV4 signature recomputed with
botocore). One ``ledger proxy`` with gateway keys serves both, so both routes
pay for the key alike; it signs each Bedrock call itself (botocore SigV4,
fixed test credentials) and reads the frames with botocore's parser. Each
stream is timed to its last byte and to its first, direct (the client signs
its own Bedrock call, as a Bedrock SDK does, before the clock starts) and
through the gateway, interleaved in turns of 10 so load hits all four alike.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from bench_gateway import Gateway, body, check, percentile
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from common import REPO, ledger_script, settle

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.fakes import clouds

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
STREAM_PATH = f"/model/{MODEL}/invoke-with-response-stream"
# What a Claude Code turn without tools sends to Bedrock (the model is in the path).
INVOKE = json.dumps(
    {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 1024,
     "messages": [{"role": "user", "content": "Summarise the design doc in three lines."}]}
).encode()  # fmt: skip
ANTHROPIC_VERSION = "2023-06-01"


class FakeBedrock:
    """``python -m tests.fakes.clouds``, once it listens."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.clouds"], cwd=REPO,
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        port = self.proc.stdout.readline().strip() if self.proc.stdout is not None else ""
        check(port.isdigit(), f"the fake Bedrock did not start: {port!r}")
        self.url = f"http://127.0.0.1:{port}"

    def auth(self) -> dict[str, int]:
        found: dict[str, int] = httpx.get(f"{self.url}/_control/auth", timeout=10).json()
        return found

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _home(root: Path, anthropic_url: str, bedrock_url: str) -> tuple[Path, str]:
    """A home with gateway keys whose gateway serves both upstreams; its key's secret."""
    home = root / f"home-bedrock-{time.monotonic_ns()}"
    subprocess.run([ledger_script(), "--home", str(home), "init"], check=True,
                   capture_output=True)  # fmt: skip
    (home / "ledger.toml").write_text(
        "[usd]\ndaily_cap = 1000000\n\n[proxy]\nrequire_keys = true\n\n"
        f'[proxy.upstream]\nanthropic = "{anthropic_url}"\nbedrock = "{bedrock_url}"\n'
        f'bedrock_control = "{bedrock_url}"\n\n[proxy.bedrock]\nregion = "{clouds.REGION}"\n\n'
        '[prices."anthropic/claude-bench"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n'
    )
    issued = subprocess.run(
        [ledger_script(), "--home", str(home), "keys", "issue", "bench"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return home, str(json.loads(issued.stdout)["key"])


def _gateway_env() -> dict[str, str]:
    """The gateway's environment: the fake's AWS credentials, an Anthropic key, no AWS files."""
    return {
        **os.environ, "AWS_ACCESS_KEY_ID": clouds.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": clouds.SECRET_KEY, "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true",
        "ANTHROPIC_API_KEY": "sk-bench",
    }  # fmt: skip


def _signed(url: str) -> dict[str, str]:
    """The SigV4 headers a Bedrock SDK sends with ``INVOKE`` to ``url``."""
    request = AWSRequest(method="POST", url=url, data=INVOKE, headers={})
    credentials = Credentials(clouds.ACCESS_KEY, clouds.SECRET_KEY)
    SigV4Auth(credentials, "bedrock", clouds.REGION).add_auth(request)
    return {name.lower(): str(value) for name, value in request.headers.items()}


def _timed(
    client: httpx.Client, path: str, content: bytes, headers: dict[str, str]
) -> tuple[float, float]:
    """One stream: (ms to its first byte, ms to its last)."""
    began = time.perf_counter()
    with client.stream("POST", path, content=content, headers=headers) as response:
        check(response.status_code == 200, f"{path}: {response.status_code}")
        chunks = response.iter_raw()
        next(chunks)
        first = time.perf_counter() - began
        for _ in chunks:
            pass
    return first * 1000, (time.perf_counter() - began) * 1000


def _calls(
    anthropic_url: str, bedrock_url: str, gateway_url: str, secret: str
) -> dict[str, Callable[[], tuple[float, float]]]:
    """Each of the four ways to stream, as one call that times itself."""
    clients = {
        "anthropic": httpx.Client(base_url=anthropic_url, timeout=60),
        "bedrock": httpx.Client(base_url=bedrock_url, timeout=60),
        "gateway": httpx.Client(base_url=gateway_url, timeout=60),
    }
    messages = body(stream=True)
    plain = {"x-api-key": "sk-bench", "anthropic-version": ANTHROPIC_VERSION}
    keyed = {"x-api-key": secret, "anthropic-version": ANTHROPIC_VERSION}
    bearer = {"authorization": f"Bearer {secret}", "content-type": "application/json"}

    def bedrock_direct() -> tuple[float, float]:
        signed = {**_signed(bedrock_url + STREAM_PATH), "content-type": "application/json"}
        return _timed(clients["bedrock"], STREAM_PATH, INVOKE, signed)

    return {
        "anthropic direct": lambda: _timed(clients["anthropic"], "/v1/messages", messages, plain),
        "anthropic via gateway": lambda: _timed(clients["gateway"], "/v1/messages", messages, keyed),
        "bedrock direct": bedrock_direct,
        "bedrock via gateway": lambda: _timed(
            clients["gateway"], f"/bedrock{STREAM_PATH}", INVOKE, bearer
        ),
    }  # fmt: skip


def _interleaved(
    ways: dict[str, Callable[[], tuple[float, float]]], count: int, warm: int = 10
) -> dict[str, list[tuple[float, float]]]:
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for one in ways.values():
        for _ in range(warm):  # connections, imports, the first fsyncs and signatures
            one()
    settle()  # the files the first calls made now count as settled
    while len(samples["bedrock direct"]) < count:
        for name, one in ways.items():
            samples[name].extend(one() for _ in range(10))
    return samples


def _bedrock_records(home: Path) -> int:
    found = 0
    for line in (home / "events.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if (
            entry["event_type"] == "budget.record_call"
            and entry["payload"].get("provider") == "bedrock"
        ):
            found += 1
    return found


def bedrock_beside_anthropic(root: Path, anthropic_url: str, count: int) -> None:
    """Print the Bedrock and Anthropic stream rows: direct, via the gateway, and the difference."""
    fake = FakeBedrock()
    try:
        home, secret = _home(root, anthropic_url, fake.url)
        gateway = Gateway(home, env=_gateway_env())
        samples = _interleaved(_calls(anthropic_url, fake.url, gateway.url, secret), count)
        gateway.stop()
        auth = fake.auth()
    finally:
        fake.stop()
    last = {name: statistics.median(s[1] for s in kept) for name, kept in samples.items()}
    first = {name: statistics.median(s[0] for s in kept) for name, kept in samples.items()}
    for cloud, label in (
        ("anthropic", "Anthropic stream (keys)"),
        ("bedrock", "Bedrock stream (SigV4)"),
    ):
        via = [s[1] for s in samples[f"{cloud} via gateway"]]
        print(
            f"{label:<25}: whole stream direct p50 {last[f'{cloud} direct']:.2f} ms, via gateway "
            f"p50 {last[f'{cloud} via gateway']:.2f} ms p99 {percentile(via, 99):.2f} ms, "
            f"adds {last[f'{cloud} via gateway'] - last[f'{cloud} direct']:.2f} ms; first byte "
            f"adds {first[f'{cloud} via gateway'] - first[f'{cloud} direct']:.2f} ms"
        )
    extra = (last["bedrock via gateway"] - last["bedrock direct"]) - (
        last["anthropic via gateway"] - last["anthropic direct"]
    )
    gated = len(samples["bedrock via gateway"]) + 10
    print(
        f"Bedrock beside Anthropic : the gateway adds {extra:+.2f} ms more on a Bedrock stream "
        f"({count} streams each, interleaved); {_bedrock_records(home)} Bedrock calls recorded of "
        f"{gated} through the gateway, signatures verified {auth['verified']}, refused {auth['refused']}"
    )
