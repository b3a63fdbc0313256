"""Anthropic's wire format: a Messages request's estimate and a response's usage.

Every request field, content block type, tool type and beta this estimate
knows is listed below with its rule (``ledger.providers.tally``); anything
else counts as the model's context window. A response reports ``usage`` in
its JSON ``message``, or across a stream's ``message_start`` and
``message_delta`` events.
"""

import math
import re
from collections.abc import Iterable
from typing import Any

from ledger.providers import media
from ledger.providers.reader import UsageReader
from ledger.providers.tally import OUTPUT, SETTING, TEXT, WALKED, WINDOW, Tally, field, items

MESSAGES_FIELDS: dict[str, str] = {
    "model": SETTING,
    "max_tokens": OUTPUT,
    "system": WALKED,
    "messages": WALKED,
    "tools": WALKED,
    "stream": SETTING,
    "metadata": SETTING,
    "stop_sequences": SETTING,
    "temperature": SETTING,
    "top_k": SETTING,
    "top_p": SETTING,
    "thinking": SETTING,  # its budget is part of max_tokens
    "tool_choice": SETTING,  # the tool-use prompt is counted at its largest (below)
    "service_tier": SETTING,  # priced by the price table's tier rates
    "cache_control": SETTING,
    "context_management": SETTING,  # clears context: never adds input
    "output_config": TEXT,  # a structured output's schema reaches the model
    "user_profile_id": SETTING,
    "workspace_id": SETTING,
    "betas": WALKED,  # the SDK's name for the anthropic-beta header
    # Bedrock invoke and Vertex rawPredict bodies: the API version, and the
    # betas they carry in the body instead of a header.
    "anthropic_version": SETTING,
    "anthropic_beta": WALKED,
    # Input or price the body does not show: a container's files, remote MCP
    # servers' tools, other models to fall back to, a summarising pass, a
    # thread's stored turns, priced regions and speeds the price table lacks.
    "container": WINDOW,
    "mcp_servers": WINDOW,
    "fallbacks": WINDOW,
    "fallback_credit_token": WINDOW,
    "compaction": WINDOW,
    "thread": WINDOW,
    "billing_policy": WINDOW,
    "inference_geo": WINDOW,
    "speed": WINDOW,
    "diagnostics": WINDOW,
}

# Content block types, by how each counts (the walker below applies the rule).
BLOCK_TYPES: dict[str, str] = {
    "text": TEXT,
    "image": "image formula (⌈w·h/750⌉ after resize), by URL or file id the context window",
    "document": "PDF pages × per-page bound, text as text; by URL or file id the context window",
    "search_result": TEXT,
    "tool_use": TEXT,
    "server_tool_use": TEXT,
    "mcp_tool_use": TEXT,
    "tool_result": WALKED,
    "mcp_tool_result": WALKED,
    "thinking": TEXT,
    "redacted_thinking": TEXT,
    # Earlier results of server tools, and other blocks held whole in the body.
    "web_search_tool_result": TEXT,
    "web_fetch_tool_result": TEXT,
    "code_execution_tool_result": TEXT,
    "bash_code_execution_tool_result": TEXT,
    "text_editor_code_execution_tool_result": TEXT,
    "tool_search_tool_result": TEXT,
    "advisor_tool_result": TEXT,
    "mcp_tool_listing": TEXT,
    "tool_addition": TEXT,
    "tool_removal": TEXT,
    "compaction": TEXT,
    "fallback": TEXT,
    "container_upload": WINDOW,  # a file in the container: the provider's to size
}

# Tool types by family (the type without its _YYYYMMDD version).
FETCHING_TOOLS = frozenset({"web_search", "web_fetch"})  # bounded by max_uses
TOOL_TYPES: dict[str, str] = {
    "custom": TEXT,  # name, description and input_schema, plus TOOL_TOKENS
    "bash": "fixed tokens",
    "text_editor": "fixed tokens",
    "computer": "fixed tokens",
    "memory": "fixed tokens",
    "web_search": WINDOW,  # results fill the context; each search is priced
    "web_fetch": WINDOW,
    "code_execution": WINDOW,
    "tool_search_tool_bm25": WINDOW,
    "tool_search_tool_regex": WINDOW,
    "mcp_toolset": WINDOW,
    "browser_toolset": WINDOW,
    "computer_toolset": WINDOW,
    "advisor": WINDOW,
}
# The system prompt each client-run tool adds, from Anthropic's tool docs
# (docs.claude.com "Bash tool", "Text editor tool", "Computer use tool": 245,
# 700 and 735 input tokens, computer use with its 499-token system prompt).
# The memory tool's is not published: it counts as the text editor's.
TOOL_FIXED_TOKENS = {"bash": 245, "text_editor": 700, "computer": 735 + 499, "memory": 700}

# Betas: the context-1m family makes the window 1M tokens; the others listed
# as settings change no input size or price (administrative ones do nothing
# on a Messages call). The rest change what a call may cost in ways the body
# does not show (a faster priced mode, fallbacks, compaction, stored threads
# and memory, another model advising), and so does any beta not listed: the
# context window.
LONG_CONTEXT_BETA = "context-1m-"
LONG_CONTEXT_WINDOW = 1_000_000
_SIZE_NEUTRAL_BETAS = (
    "prompt-caching-2024-07-31", "pdfs-2024-09-25", "token-counting-2024-11-01",
    "message-batches-2024-09-24", "computer-use-2024-10-22", "computer-use-2025-01-24",
    "computer-use-2025-11-24", "token-efficient-tools-2025-02-19", "output-128k-2025-02-19",
    "output-300k-2026-03-24", "files-api-2025-04-14", "mcp-client-2025-04-04",
    "mcp-client-2025-11-20", "interleaved-thinking-2025-05-14",
    "fine-grained-tool-streaming-2025-05-14", "code-execution-2025-05-22",
    "code-execution-2025-08-25", "extended-cache-ttl-2025-04-11", "search-results-2025-06-09",
    "context-management-2025-06-27", "model-context-window-exceeded-2025-08-26",
    "web-fetch-2025-09-10", "skills-2025-10-02", "structured-outputs-2025-11-13",
    "effort-2025-11-24", "advanced-tool-use-2025-11-20", "dev-full-thinking-2025-05-14",
    "thinking-token-count-2026-05-13", "thinking-display-updates-2026-08-18",
    "thinking-binding-controls-2026-08-01", "cache-diagnosis-2026-04-07",
    # Administrative APIs' betas: nothing on a Messages call.
    "admin-user-sign-out-2026-10-08", "analytics-usage-cost-2026-08-24",
    "ce-claude-code-managed-settings-2026-10-06", "ce-plugins-2026-09-01",
    "ce-user-management-2026-07-13", "google-managed-data-controls-2026-09-01",
    "spend-limit-reads-2026-09-26", "telemetry-destinations-2026-08-11",
    "user-profiles-2026-03-24", "user-profiles-2026-08-18", "user-profiles-2026-09-04",
    "user-profiles-billing-2026-10-01", "webhooks-2026-10-07", "experimental-claude-tag-2026-10-21",
    "efs-2026-10-01",
    # Claude Code names itself (and its sign-in) with these on every call; the
    # request's own fields carry everything it sends.
    "claude-code-20250219", "oauth-2025-04-20", "prompt-caching-scope-2026-01-05",
    # Tool search: the deferred tools are defined in the request and counted there.
    "tool-search-tool-2025-10-19",
    # The web search tool's beta on Bedrock and Vertex (Claude Code sends it there on
    # every call): it only enables the tool, which is counted by its own rule.
    "web-search-2025-03-05",
)  # fmt: skip
_WINDOW_BETAS = (
    "fast-mode-2026-02-01", "compact-2026-01-12", "compact-2026-09-04",
    "server-side-fallback-2026-06-01", "server-side-fallback-2026-07-01",
    "fallback-credit-2026-06-01", "fallback-credit-2026-07-01", "message-threads-2026-08-12",
    "agent-memory-2026-07-22", "dreaming-2026-04-21", "managed-agents-2026-04-01",
    "advisor-tool-2026-03-01", "inline-tools-2026-09-15", "mcp-client-2026-09-15",
    "mcp-tunnels-2026-06-22", "mid-conversation-output-config-2026-07-01",
    "mid-conversation-system-clear-at-2026-08-21", "mid-conversation-tool-changes-2026-07-01",
    "task-budgets-2026-03-13",
)  # fmt: skip
BETAS: dict[str, str] = (
    dict.fromkeys(_SIZE_NEUTRAL_BETAS, SETTING)
    | dict.fromkeys(_WINDOW_BETAS, WINDOW)
    | {LONG_CONTEXT_BETA + "2025-08-07": "context window of 1M tokens"}
)

# Framing the provider adds (Anthropic's "Tool use system prompt" table:
# 346 tokens with tool_choice auto or none, 313 with any or tool, Claude 4
# and 3.7 models). Turn markers per message and per request are not
# published; a one-word message counts 8 tokens at the count_tokens endpoint,
# so 8 per message and 16 per request bound them.
TOOL_USE_PROMPT_TOKENS = 346
TOOL_TOKENS = 12  # each tool definition's own wrapping
MESSAGE_TOKENS = 8
REQUEST_TOKENS = 16

# Images: resized to at most 1568 px on the long edge and about 1,600 tokens
# (docs.claude.com "Vision": tokens = width × height / 750).
IMAGE_LONG_EDGE = 1568
IMAGE_MAX_TOKENS = 1600
# PDFs: each page is its text plus an image of the page (docs.claude.com "PDF
# support": 1,500-3,000 text tokens a page, and the page image's tokens).
PDF_PAGE_TOKENS = 3000 + IMAGE_MAX_TOKENS

_BY_REFERENCE = frozenset({"url", "file"})  # a source the provider fetches itself
_VERSION = re.compile(r"_\d{8}$")


def tool_family(kind: Any) -> str:
    """A tool's type without its version date (``web_search_20250305`` → ``web_search``)."""
    return "custom" if kind is None else _VERSION.sub("", str(kind))


def image_tokens(width: int, height: int) -> int:
    """What Claude bills for a ``width`` × ``height`` image, after its resize."""
    fitted_width, fitted_height = media.fit(width, height, IMAGE_LONG_EDGE)
    return min(IMAGE_MAX_TOKENS, math.ceil(fitted_width * fitted_height / 750))


def _content(tally: Tally, content: Any) -> None:
    if isinstance(content, str) or not isinstance(content, list):
        tally.text(content)
        return
    for block in content:
        _block(tally, block)


def _image(tally: Tally, source: Any) -> None:
    if field(source, "type") in _BY_REFERENCE:
        tally.window("image by reference")
        return
    size = media.image_size(field(source, "data"))
    tally.image(IMAGE_MAX_TOKENS if size is None else image_tokens(*size))


def _document(tally: Tally, block: dict[str, Any]) -> None:
    tally.text(block.get("title"))
    tally.text(block.get("context"))
    source = block.get("source")
    source_kind = field(source, "type")
    if source_kind in _BY_REFERENCE:
        tally.window("document by reference")
    elif source_kind == "base64":
        pages = media.pdf_pages(field(source, "data"))
        if pages is None:
            tally.window("unreadable PDF")
        else:
            tally.add(pages * PDF_PAGE_TOKENS)
    elif source_kind == "text":
        tally.text(field(source, "data"))
    elif source_kind == "content":
        _content(tally, field(source, "content"))
    else:
        tally.window(f"document source {source_kind!r}")


def _block(tally: Tally, block: Any) -> None:
    kind = field(block, "type")
    rule = BLOCK_TYPES.get(kind) if isinstance(kind, str) else None
    if rule is None or rule == WINDOW:
        tally.window(f"content block {kind!r}")
    elif kind == "text":
        tally.text(block.get("text"))
    elif kind == "image":
        _image(tally, block.get("source"))
    elif kind == "document":
        _document(tally, block)
    elif kind in {"tool_use", "server_tool_use", "mcp_tool_use"}:
        tally.text(block.get("name"))
        tally.json(block.get("input"))
    elif kind in {"tool_result", "mcp_tool_result"}:
        _content(tally, block.get("content"))
    elif kind == "thinking":
        tally.text(block.get("thinking"))
    elif kind == "redacted_thinking":
        tally.text(block.get("data"))
    else:
        tally.json(block)


def _tools(tally: Tally, tools: Any) -> None:
    given = items(tools)
    if given:
        tally.add(TOOL_USE_PROMPT_TOKENS)
    for tool in given:
        family = tool_family(field(tool, "type"))
        rule = TOOL_TYPES.get(family, WINDOW)
        tally.add(TOOL_TOKENS)
        if family in TOOL_FIXED_TOKENS:
            tally.add(TOOL_FIXED_TOKENS[family])
        elif rule == WINDOW:
            tally.window(f"tool {family!r}")
        else:
            tally.text(field(tool, "name"))
            tally.text(field(tool, "description"))
            tally.json(field(tool, "input_schema"))


def request_betas(headers: Iterable[tuple[str, str]]) -> list[str]:
    """The betas a request names in its ``anthropic-beta`` headers."""
    found: list[str] = []
    for name, value in headers:
        if name.lower() == "anthropic-beta":
            found.extend(part.strip() for part in value.split(",") if part.strip())
    return found


def beta_window(tally: Tally, betas: Iterable[str]) -> int | None:
    """Count the request's betas; the context window they set (1M for context-1m), if any."""
    window = None
    for beta in betas:
        if beta.startswith(LONG_CONTEXT_BETA):
            window = LONG_CONTEXT_WINDOW
        elif BETAS.get(beta, WINDOW) == WINDOW:
            tally.window(f"beta {beta!r}")
    return window


def tally_request(tally: Tally, body: dict[str, Any], model: str = "") -> None:
    """Count a Messages request's fields, system prompt, messages and tools into ``tally``."""
    del model  # every Claude model bills images and pages alike
    tally.fields(body, MESSAGES_FIELDS, "request")
    tally.add(REQUEST_TOKENS)
    _content(tally, body.get("system"))
    for message in items(body.get("messages")):
        tally.add(MESSAGE_TOKENS)
        if isinstance(message, dict):
            _content(tally, message.get("content"))
        else:
            tally.json(message)
    _tools(tally, body.get("tools"))
    # The body's betas (``betas``; Bedrock's and Vertex's ``anthropic_beta``) are
    # counted with the headers' by ``beta_window``, which also sets the window.


def body_betas(body: dict[str, Any]) -> list[str]:
    """The betas a request names in its body: ``betas``, or the clouds' ``anthropic_beta``."""
    return [str(beta) for beta in (*items(body.get("betas")), *items(body.get("anthropic_beta")))]


class AnthropicUsageReader(UsageReader):
    """Anthropic Messages responses."""

    provider = "anthropic"

    def _data(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message = data["message"]
            self._take_ids(message)
            self._merge_usage(message.get("usage"))
        elif kind == "message_delta":
            self._merge_usage(data.get("usage"))
        elif kind == "message_stop":
            self.finished = True
