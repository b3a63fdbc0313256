"""Which program made a call, from its User-Agent: the ``client`` dimension.

Each known client sends a User-Agent of its own (observed from the releases the
tests drive and the SDKs' sources); anything else, or none, is ``other``. The
name is sealed with the verdict, so a budget may ``match`` on it and reports
may group by it.
"""

import re

OTHER = "other"
CLIENT_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

# First match wins: the CLIs before the SDKs they are built on.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("claude-code", r"^claude-cli/|claude-code"),
        ("codex", r"^codex[_-]|codex_cli_rs|codex_exec"),
        ("gemini-cli", r"^GeminiCLI/|gemini-cli"),
        ("anthropic-sdk-python", r"^Anthropic/Python"),
        ("anthropic-sdk-typescript", r"^Anthropic/JS"),
        ("openai-python", r"^OpenAI/Python"),
        ("openai-node", r"^OpenAI/JS"),
        ("google-genai-python", r"google-genai-sdk/.*gl-python|^google-genai"),
        ("litellm", r"litellm"),
        ("langchain", r"langchain"),
        ("curl", r"^curl/"),
        ("python-httpx", r"^python-httpx/"),
        ("python-requests", r"^python-requests/"),
    )
)


def client_of(user_agent: str | None) -> str:
    """The client a User-Agent names, else ``other``."""
    if not user_agent:
        return OTHER
    for name, pattern in _PATTERNS:
        if pattern.search(user_agent[:512]):
            return name
    return OTHER
