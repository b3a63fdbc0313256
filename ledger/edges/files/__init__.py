"""The file store in a home, behind the same ports as the PostgreSQL store.

The chain (``events.jsonl``: ``chainfile``, ``chainverify``, ``groupcommit``),
derived state on disk and in memory (``statefile``, ``keptstate``), writer keys
and the trust store (``keyfiles``), checkpoints, snapshots, the Merkle node
index, the spool of records waiting for a database store, and the replies kept
for clients' retries. Whole-file writes come from ``ledger.edges.fileio``.
Callers import the module they use.
"""
