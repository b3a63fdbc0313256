"""Every provider's usage reader, registered by route kind.

The base class (``ledger.providers.reader``) knows no provider; each
provider's module subclasses it, and this module, which imports them all,
registers each under the route kind it reads, so no module imports one that
imports it back.
"""

from ledger.providers import anthropic, gemini, openai_usage
from ledger.providers.reader import READERS, UsageReader

READERS.update(
    {
        "messages": anthropic.AnthropicUsageReader,
        "chat_completions": openai_usage.ChatUsageReader,
        "responses": openai_usage.ResponsesUsageReader,
        "generate_content": gemini.GeminiUsageReader,
    }
)

__all__ = ["UsageReader"]
