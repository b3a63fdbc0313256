"""Guards around official provider SDK clients.

Optional extras ``ledger[anthropic]`` and ``ledger[openai]``; no module here
imports an SDK: each wraps the client it is given.
"""
