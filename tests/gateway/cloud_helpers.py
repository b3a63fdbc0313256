"""The fake clouds as a process, a home whose gateway serves them, and that gateway."""

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import REPO, clean_env
from tests.fakes import clouds
from tests.gateway.helpers import NOW, Proxy, records, start_proxy


class Clouds:
    """``python -m tests.fakes.clouds``, once it listens."""

    def __init__(self, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.clouds"], cwd=REPO,
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, **env},
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{self.proc.stdout.readline().strip()}"

    def get(self, path: str) -> Any:
        return httpx.get(self.url + path, timeout=10).json()

    def calls(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get("/_control/calls")["calls"]
        return found

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def cloud_config(fake: Clouds, *, require_keys: bool = True, cap_usd: str = "1") -> str:
    return (
        f"[usd]\ndaily_cap = {cap_usd}\n\n[billing]\nstale_halt_pct = 100\n\n"
        f"[proxy]\nrequire_keys = {'true' if require_keys else 'false'}\n\n"
        f'[proxy.upstream]\nbedrock = "{fake.url}"\nbedrock_control = "{fake.url}"\n'
        f'vertex = "{fake.url}"\n\n'
        '[proxy.bedrock]\nregion = "us-east-1"\n\n'
        f'[proxy.azure]\nendpoint = "{fake.url}"\n\n'
        '[proxy.azure.deployments]\nprod-gpt5 = "gpt-5"\n'
    )


def cloud_home(home: Path, fake: Clouds, **options: Any) -> str:
    """Write the home's config for the fake clouds; the secret of a gateway key issued there."""
    (home / "ledger.toml").write_text(cloud_config(fake, **options))
    issued = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), "keys", "issue", "dev"],
        env=clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert issued.returncode == 0, issued.stderr
    secret: str = json.loads(issued.stdout)["key"]
    return secret


def service_account(url: str) -> dict[str, str]:
    """A service-account key file whose token server is the fake's (no network)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()  # fmt: skip
    return {
        "type": "service_account", "project_id": "ledger-test", "private_key_id": "test",
        "private_key": pem, "client_email": "gateway@ledger-test.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": f"{url}/token",
    }  # fmt: skip


def start_cloud_gateway(home: Path, tmp_path: Path, fake: Clouds, **env: str) -> Proxy:
    """The gateway with the fake clouds' test credentials in its environment."""
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps(service_account(fake.url)))
    environ = clean_env(
        LEDGER_NOW=NOW, AWS_ACCESS_KEY_ID=clouds.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=clouds.SECRET_KEY,
        AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true", GOOGLE_APPLICATION_CREDENTIALS=str(adc),
        AZURE_OPENAI_API_KEY=clouds.AZURE_KEY, **env,
    )  # fmt: skip
    return start_proxy(home, "--listen", "127.0.0.1:0", env=environ)


VERTEX_PATH = (
    "/vertex/v1/projects/p/locations/us-east5/publishers/anthropic/models/"
    "claude-sonnet-4-5@20250929:rawPredict"
)
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
MESSAGES = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 200,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip


@dataclass
class Served:
    """One home, its gateway key and gateway, and the fake clouds, shared by a module's tests."""

    home: Path
    secret: str
    gateway: Proxy
    fake: Clouds

    def calls(self) -> list[dict[str, Any]]:
        return self.fake.calls()[self._calls :]

    def records(self) -> list[dict[str, Any]]:
        return records(self.home)[self._records :]

    def verified(self) -> int:
        return int(self.fake.get("/_control/auth")["verified"]) - self._verified

    def mark(self) -> None:
        """Count only what comes after this (each test's own calls and records)."""
        self._calls, self._records = len(self.fake.calls()), len(records(self.home))
        self._verified = int(self.fake.get("/_control/auth")["verified"])
        assert self.fake.get("/_control/auth")["refused"] == 0


@contextlib.contextmanager
def served_clouds(base: Path) -> Iterator[Served]:
    """A home in ``base`` with its gateway key, its gateway and the fake clouds, stopped after."""
    home = base / "home"
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--home", str(home), "init", "--billing", "none"],
        env=clean_env(LEDGER_NOW=NOW), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fake = Clouds()
    secret = cloud_home(home, fake)
    gateway = start_cloud_gateway(home, base, fake)
    yield Served(home, secret, gateway, fake)
    assert gateway.stop() == 0, gateway.lines
    fake.stop()
