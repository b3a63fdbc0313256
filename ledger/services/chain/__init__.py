"""The chain as the other services use it: appending, derived state, proofs, repair.

Sealing entries under the chain lock with the active writer key (``writer``),
loading and keeping the derived counter state (``state``), idempotency keys
and served requests found in it (``idempotency``, ``requests``), verification,
checkpoints and remembered findings (``verify``, ``findings``), Merkle proofs,
snapshots and recovery, and creating a home. These modules import no other
service area. Callers import the module they use.
"""
