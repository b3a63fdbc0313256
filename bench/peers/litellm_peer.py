"""LiteLLM's proxy as an optional peer of the gateway in bench_gateway.py (never a dependency).

    python bench/peers/litellm_peer.py --install     # make bench/peers/.venv-litellm, pip install
    python bench/bench_gateway.py --quick --peer litellm

LiteLLM lives in its own virtual environment beside this file, made only when
``--install`` is given; nothing of it is installed into the product's
environment. Started, it proxies the Anthropic Messages API (``/v1/messages``)
to the same local upstream the gateway and the floor use, with no database (so
it enforces no budget), and is measured in the same interleaved run.
"""

import argparse
import subprocess
import tempfile
import time
import venv
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-litellm"
LITELLM = VENV / "bin" / "litellm"
REQUIREMENT = "litellm[proxy]"


def installed() -> bool:
    """Whether the peer's environment is there."""
    return LITELLM.exists()


def install() -> None:
    """Make the peer's own environment and install LiteLLM's proxy into it."""
    venv.EnvBuilder(with_pip=True).create(VENV)
    subprocess.run([str(VENV / "bin" / "pip"), "install", "--quiet", REQUIREMENT], check=True)


class LiteLLM:
    """A running LiteLLM proxy in front of ``upstream``."""

    def __init__(self, upstream: str, port: int) -> None:
        config = Path(tempfile.mkdtemp(prefix="bench-litellm-")) / "config.yaml"
        config.write_text(
            "model_list:\n"
            "  - model_name: claude-bench\n"
            "    litellm_params:\n"
            "      model: anthropic/claude-bench\n"
            f"      api_base: {upstream}\n"
            "      api_key: sk-bench\n"
        )
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
             "--num_workers", "1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health/liveliness", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        self.stop()
        raise SystemExit("the LiteLLM peer did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--install", action="store_true", help="make the peer's environment")
    args = parser.parse_args()
    if args.install:
        install()
    print(f"LiteLLM peer {'installed' if installed() else 'not installed'} ({VENV})")


if __name__ == "__main__":
    main()
