"""The daemon's follow-ups on money: the provider's bill and what people must hear.

``poll`` reads the bill between reconciles (SPEC §5); ``reconcile`` sets the
local counter against the bill and rebuilds derived state; ``alerts`` follows
the chain's new entries and posts the ones an operator must hear. Callers
import the module they use.
"""
