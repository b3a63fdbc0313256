"""The PostgreSQL store a fleet shares, behind the same ports as the file store.

The connection and its schema (``db``, ``schema``), the chain (``store``),
derived state and the fleet's shared secret that authenticates it (``state``,
``fleetsecret``), checkpoints, snapshots, the trust store and the gateway
keys (``gatewaykeys``) in the database;
psycopg is imported in this package only. Callers import the module they use.
"""
