"""``ledger console``: spend seen and steered from a browser.

An adapter like the command line: it reads the home's services and derived
state (``data``), changes nothing but keys, and is never on the call path.
"""
