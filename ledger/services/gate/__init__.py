"""The USD gate: a call's verdict before it runs and its spend after (SPEC §3–4, §7–8).

``gate`` decides ``verdict`` and ``usage``; ``recording`` records actual
spend; ``spool`` keeps spend that an unreachable store could not take;
``calls`` checks and answers the per-call requests in one place for the CLI,
the gateway and the Python API, with prices (``prices``), known providers
(``providers``) and the budgets as those requests show them
(``budget_views``). Callers import the module they use.
"""
