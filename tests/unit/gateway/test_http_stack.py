"""The gateway's HTTP stack runs at speed: its speed dependencies are installed and used."""

import importlib.util
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def _requirement_names() -> set[str]:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    return {
        dependency.split(";")[0].split(">")[0].split("[")[0].strip() for dependency in dependencies
    }


@pytest.mark.parametrize("name", ["sniffio", "uvloop", "httptools"])
def test_speed_dependencies_are_install_dependencies(name: str):
    assert name in _requirement_names()
    assert importlib.util.find_spec(name) is not None


def test_uvicorn_picks_uvloop_and_httptools():
    """``loop="auto"`` and ``http="auto"`` (the gateway's settings) choose them when present."""
    import uvicorn

    config = uvicorn.Config(app="ledger.gateway.app:build_app", factory=False)
    config.load()
    assert config.http_protocol_class.__module__.endswith("httptools_impl")
    assert config.loop == "auto"
    from uvicorn.loops.auto import auto_loop_factory

    factory = auto_loop_factory(use_subprocess=False)
    assert factory is not None
    assert "uvloop" in factory.__module__
