"""The operator commands: the typer app (``app``) and one module per command family.

Everything a person types to set up, watch and prove a home (``init``,
``status``, ``report``, ``verify``, ``serve``, ``proxy``, ...). The per-call
commands an agent runs are in ``ledger.cli.percall``.
"""
