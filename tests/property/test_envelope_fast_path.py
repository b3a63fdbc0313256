"""Property: lines ending in our signature tail parse exactly as RFC 8785 says.

``parse_line`` takes the signed bytes of a line ending in our writer's tail by
slicing, once it has proved the slice canonical. The oracle here knows nothing
of that shortcut: it parses the whole line with ``json``, drops the signature
fields and asks ``rfc8785`` for the canonical bytes. The lines come from a
renderer that writes what other implementations of the format may write:
``\\uXXXX`` escapes of any character (surrogate pairs included), ``\\/``, either
hex case, whitespace, any key order, floats, NaN, integers past 2**53 - 1.
"""

import base64
import json
import random
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.canonical import sha256_hex
from ledger.core.envelope import SIGNATURE_FIELDS, EnvelopeFormatError, parse_line

SAFE = 2**53 - 1
TAIL_SIGNATURE = base64.b64encode(bytes(range(64))).decode("ascii")
TAIL = f',"signature":"{TAIL_SIGNATURE}","signing_key_id":"k-1"}}'

# Strings that stress the escape rules: ASCII (the shortcut's domain), DEL,
# controls, quotes and backslashes, Latin-1, BMP above the surrogates, astral.
CHARS = st.sampled_from(["a", "Z", "0", " ", "/", '"', "\\", "\x7f", "\x00", "\n", "\x1f", "é", "\ufb01", "\U0001f600"])  # fmt: skip
LONE_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.lists(CHARS | LONE_SURROGATES, max_size=6).map("".join) | st.text(max_size=6)
NUMBERS = (
    st.integers(min_value=-SAFE, max_value=SAFE)
    | st.integers(min_value=SAFE - 2, max_value=SAFE + 2)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
)
VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)
HASHES = st.just("GENESIS") | st.text("0123456789abcdef", min_size=64, max_size=64)
ENTRIES = st.fixed_dictionaries(
    {
        "schema_version": st.just("1.1.0"),
        "primitive_id": st.just("L2") | TEXT.filter(bool),
        "event_type": st.sampled_from(["budget.record_call", "ledger.snapshot"]),
        "ts_utc": st.just("2026-11-22T00:00:00.000000Z"),
        "prev_hash": HASHES,
        "payload": st.dictionaries(TEXT, VALUES, max_size=4),
        "redaction_applied": st.none() | st.lists(TEXT, max_size=2),
    }
)


def _escape(char: str) -> str:
    """``char`` as one or two ``\\uXXXX`` escapes (UTF-16 units)."""
    units = char.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i] << 8 | units[i + 1]:04x}" for i in range(0, len(units), 2))


class Renderer:
    """Writes JSON the way some other implementation of the format might."""

    def __init__(self, rng: random.Random, style: str) -> None:
        self.rng = rng
        self.style = style  # "canonical-ish": sorted and compact; "wild": anything

    def _maybe(self, chance: float) -> bool:
        return self.style == "wild" and self.rng.random() < chance

    def string(self, text: str) -> str:
        out = []
        for char in text:
            if char in '"\\' or char < " ":
                out.append(json.dumps(char, ensure_ascii=False)[1:-1])
            elif char == "/" and self._maybe(0.5):
                out.append("\\/")
            elif self._maybe(0.3) or (not char.isascii() and self.rng.random() < 0.5):
                escaped = _escape(char)
                out.append(escaped.upper().replace("\\U", "\\u") if self._maybe(0.3) else escaped)
            else:
                out.append(char)
        return f'"{"".join(out)}"'

    def value(self, value: Any) -> str:
        if isinstance(value, dict):
            keys = sorted(value)
            if self._maybe(0.2):
                self.rng.shuffle(keys)
            colon, comma = (": ", ", ") if self._maybe(0.1) else (":", ",")
            items = comma.join(f"{self.string(k)}{colon}{self.value(value[k])}" for k in keys)
            return "{" + items + "}"
        if isinstance(value, list):
            return "[" + ",".join(self.value(item) for item in value) + "]"
        if isinstance(value, str):
            return self.string(value)
        return json.dumps(value)  # null, booleans, integers, floats, NaN, Infinity


def _line(entry: dict[str, Any], rng: random.Random, style: str) -> bytes:
    body = Renderer(rng, style).value(entry)
    return (body[:-1] + TAIL).encode("utf-8", "surrogatepass")


def _oracle(line: bytes) -> bytes | None:
    """RFC 8785 bytes of the line without its signature fields; ``None`` if it has none."""
    try:
        document = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    for field in SIGNATURE_FIELDS:
        document.pop(field)
    try:
        return bytes(rfc8785.dumps(document))
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):  # a lone surrogate
        return None


def _check(line: bytes) -> None:
    expected = _oracle(line)
    if expected is None:
        with pytest.raises(EnvelopeFormatError):
            parse_line(line)
        return
    parsed = parse_line(line)
    assert parsed.preimage == expected
    assert parsed.entry_hash == sha256_hex(expected)
    assert (parsed.signature, parsed.signing_key_id) == (TAIL_SIGNATURE, "k-1")


@settings(max_examples=100)  # cheap, and the renderer has many branches to reach
@given(ENTRIES, st.randoms(use_true_random=False), st.sampled_from(["canonical-ish", "wild"]))
def test_tail_lines_parse_as_rfc8785_says(entry, rng, style):
    """Signed bytes and hash of a tail line equal RFC 8785 of its entry, or it is refused."""
    _check(_line(entry, rng, style))


@pytest.mark.parametrize(
    "payload_json",
    [
        '{"x":"\\u00e9"}',  # RFC 8785 writes the character, not the escape
        '{"x":"\\u007f"}',  # DEL is written as itself
        '{"x":"\\ud83d\\ude00"}',  # an astral character as a surrogate pair
        '{"x":"\\ud800"}',  # a lone surrogate: no UTF-8 form, refused
        '{"z":1,"\\u00e9":2}',  # an escaped key, in RFC 8785's order
        '{"x":9007199254740991}',  # the largest safe integer: fine as it is
        '{"x":9007199254740992}',  # past it: refused
        '{"x":-12345678901234567890}',
        '{"x":NaN}',
        '{"x":-Infinity}',
        '{"x":1.0}',  # a float: written as 1
        '{"x":-0}',  # written as 0
        '{"x":"\\/"}',
        '{"x":"\\u0041"}',
        '{"x":"\\u001F"}',  # upper-case hex
    ],
)
def test_known_divergences_between_json_and_rfc8785(payload_json):
    """Each place where json.dumps and RFC 8785 part ways is taken the slow way."""
    body = (
        '{"event_type":"budget.record_call","payload":' + payload_json + ',"prev_hash":"GENESIS",'
        '"primitive_id":"L2","redaction_applied":null,"schema_version":"1.1.0",'
        '"ts_utc":"2026-11-22T00:00:00.000000Z"}'
    )
    _check((body[:-1] + TAIL).encode("ascii"))


def test_our_canonical_line_takes_the_shortcut_unchanged():
    """A line in our own form keeps its exact bytes as the signed bytes."""
    body = (
        '{"event_type":"budget.record_call","payload":{"n":1,"s":"a\\"b\\\\c\\n"},'
        '"prev_hash":"GENESIS","primitive_id":"L2","redaction_applied":null,'
        '"schema_version":"1.1.0","ts_utc":"2026-11-22T00:00:00.000000Z"}'
    ).encode("ascii")
    assert parse_line(body[:-1] + TAIL.encode("ascii")).preimage == body
    _check(body[:-1] + TAIL.encode("ascii"))
