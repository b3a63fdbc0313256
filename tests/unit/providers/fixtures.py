"""The golden provider fixtures (tests/fixtures/providers), shaped as the providers document them."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "providers"


def fixture(name: str) -> bytes:
    """The bytes of one fixture file."""
    return (FIXTURES / name).read_bytes()
