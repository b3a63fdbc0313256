"""Read-only views over the chain and derived state (SPEC §10).

``explain`` says why a sealed verdict came out as it did; ``report`` and
``report_detail`` draw one budget day from the verified chain; ``metrics``
gathers the figures ``ledger metrics`` exposes. Callers import the module they
use.
"""
