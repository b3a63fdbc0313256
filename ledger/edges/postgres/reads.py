"""What every decision reads under the chain lock, as the statements that read it.

A group reads them together with taking the lock, in one round trip
(``ledger.edges.postgres.group``); the store objects find the rows there
before they would ask the database themselves.
"""

# One round trip: the newest row, any note of a changed row, and (kept for the
# state store and the checkpoints, read in the same transaction right after)
# the derived-state row, the newest stored checkpoint (``checkpoints.NEWEST_SQL``)
# and the newest segment's seal with the open range's first time (``segments``),
# all index lookups.
HEAD_SQL = (
    "SELECT c.seq, c.end_pos, c.line, (SELECT min(coalesce(t.seq, 0)) FROM chain_tampered t),"
    " (SELECT count(*) FROM chain_tampered), s.head_hash, s.size, s.body, k.entries, k.document,"
    " g.number, g.last_seq, o.ts_utc"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN LATERAL (SELECT seq, end_pos, line FROM chain ORDER BY seq DESC LIMIT 1) AS c"
    " ON true LEFT JOIN derived_state AS s ON s.id = 1 LEFT JOIN LATERAL"
    " (SELECT entries, document FROM checkpoints ORDER BY entries DESC, id DESC LIMIT 1) AS k"
    " ON true LEFT JOIN LATERAL (SELECT number, last_seq FROM segments ORDER BY number DESC"
    " LIMIT 1) AS g ON true LEFT JOIN LATERAL (SELECT ts_utc FROM chain"
    " WHERE seq = coalesce(g.last_seq, 0) + 1) AS o ON true"
)

TRUST_SQL = "SELECT document FROM trust_store WHERE id = 1"

# Read by a group as it takes the lock.
AT_GROUP_START = (TRUST_SQL, HEAD_SQL)
