"""Guards around official provider SDK clients.

Optional extras ``spend-ledger[anthropic]`` and ``spend-ledger[openai]``; no module here
imports an SDK: each wraps the client it is given.
"""
