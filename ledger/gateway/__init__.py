"""``ledger proxy``: the gateway that gates every model call passing through it.

``app`` answers the requests (starlette), ``exchange`` records each admitted
call once, ``committer`` seals decisions and records in group commits,
``caller`` says who is calling, ``relay`` what crosses unchanged, and
``serve`` runs it all under uvicorn. Only ``ledger proxy`` and ``ledger
daemon`` import this package: the per-call commands never pay for it.
"""
