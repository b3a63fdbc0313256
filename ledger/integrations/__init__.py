"""Guards around official provider SDK clients.

Optional extras ``spend-ledger[anthropic]`` and ``spend-ledger[openai]``. Each guard wraps
the HTTP transport of the client it is given; the SDK itself is imported only
when a guard is made, and its HTTP library (``httpx2``) only by the guard modules.
"""
