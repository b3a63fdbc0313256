"""``ledger serve``: the resident gate answering the per-call commands on ``gate.sock``.

``protocol`` is the wire format the client and the server share (stdlib only, so
the client's front door stays light); ``loop`` is the server: the socket, the
peer check, group commit and the SIGTERM drain.
"""
