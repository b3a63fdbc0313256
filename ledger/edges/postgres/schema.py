"""The tables of a fleet's store (SPEC §8), version 5, and the steps from versions 1 to 4.

``chain`` holds one row per entry, in chain order: the exact line bytes, the
entry's hash, and the byte offset after the line (``end_pos``), so positions
in the table are the ones a file of the same lines would have.

Rows of ``chain`` and ``checkpoints`` are appended only. A trigger refuses
every UPDATE, DELETE and TRUNCATE of them, whoever asks, unless it runs inside
``recover_chain()``: a ``SECURITY DEFINER`` function owned by the tables'
owner, which only roles granted EXECUTE on it may call. The trigger checks
both that the current role is the tables' owner (true inside that function,
never for an ordinary role, whatever it sets) and that the function's
transaction-local flag is set, so the owner's own stray ``DELETE`` is refused
too. What no trigger can stop: a superuser or the owner may drop or disable a
trigger; the signed checkpoints kept in ``checkpoints`` (and in the hosts'
homes), the MAC of the derived state and the chain's own hashes and
signatures are what still catch such an edit.

A second trigger (version 1's) notes in ``chain_tampered`` any change that got
through anyway, and the gate halts while a note stands.

``fleet_secret`` holds only a check value of the hosts' shared secret (an
HMAC of a fixed text under it), never the secret: it tells a host whose
secret is missing or differs from the fleet's.

``gateway_keys`` (version 3) holds the fleet's gateway keys (SPEC §12), one
row each: a key issued on one host is presented at any host's gateway, and a
revocation on one host refuses it at every gateway. As in the home's key
file, only the SHA-256 of each secret is kept, never the secret. Version 4
adds its ``role`` column: a console key's role (``admin``, ``viewer``), NULL
for a gateway key, so console keys are kept in the fleet's store too.

``segments`` (version 5) holds the chain's sealed segments (SPEC §21): a
range of rows ``first_seq`` to ``last_seq`` and the signed checkpoint of its
last row that seals it, written in the same transaction as the append that
filled it. Its rows are appended only, as ``chain``'s are; ``recover_chain()``
moves the seals of rows it moves to evidence there too.
"""

_VERSION_1 = (
    """
CREATE TABLE schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
""",
    """
CREATE TABLE chain (
    seq bigint PRIMARY KEY CHECK (seq >= 1),
    end_pos bigint NOT NULL UNIQUE,
    entry_hash text NOT NULL,
    ts_utc text NOT NULL,
    event_type text NOT NULL,
    line bytea NOT NULL
)
""",
    """
CREATE TABLE derived_state (
    id smallint PRIMARY KEY CHECK (id = 1),
    head_seq bigint NOT NULL,
    head_hash text,
    size bigint NOT NULL,
    body bytea NOT NULL
)
""",
    """
CREATE TABLE idempotency_keys (
    key text PRIMARY KEY,
    record bytea NOT NULL
)
""",
    """
CREATE TABLE trust_store (
    id smallint PRIMARY KEY CHECK (id = 1),
    document bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)
""",
    """
CREATE TABLE evidence (
    id bigserial PRIMARY KEY,
    moved_at timestamptz NOT NULL DEFAULT now(),
    seq bigint NOT NULL,
    line bytea NOT NULL,
    reason text NOT NULL
)
""",
    """
CREATE TABLE chain_tampered (
    id bigserial PRIMARY KEY,
    noticed_at timestamptz NOT NULL DEFAULT now(),
    seq bigint,
    operation text NOT NULL,
    by_role text NOT NULL DEFAULT current_user
)
""",
    """
CREATE FUNCTION note_chain_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF coalesce(current_setting('ledger.recovering', true), '') <> 'on' THEN
        IF TG_LEVEL = 'ROW' THEN
            INSERT INTO chain_tampered (seq, operation) VALUES (OLD.seq, TG_OP);
        ELSE
            INSERT INTO chain_tampered (seq, operation) VALUES (NULL, TG_OP);
        END IF;
    END IF;
    RETURN NULL;
END $$
""",
    """
CREATE TRIGGER chain_changed AFTER UPDATE OR DELETE ON chain
    FOR EACH ROW EXECUTE FUNCTION note_chain_change()
""",
    """
CREATE TRIGGER chain_truncated AFTER TRUNCATE ON chain
    FOR EACH STATEMENT EXECUTE FUNCTION note_chain_change()
""",
)


_VERSION_2 = (
    """
CREATE TABLE checkpoints (
    id bigserial PRIMARY KEY,
    written_at timestamptz NOT NULL DEFAULT now(),
    entries bigint NOT NULL CHECK (entries >= 1),
    head_hash text NOT NULL,
    document bytea NOT NULL
)
""",
    # Every verdict reads the checkpoint vouching for the most entries.
    "CREATE INDEX checkpoints_by_entries ON checkpoints (entries DESC, id DESC)",
    """
CREATE TABLE fleet_secret (
    id smallint PRIMARY KEY CHECK (id = 1),
    check_value text NOT NULL
)
""",
    """
CREATE FUNCTION refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('ledger.recovering', true), '') = 'on'
       AND current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID)
    THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = TG_OP || ' of ' || TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME
            || ' refused: its rows are appended only',
        ERRCODE = 'insufficient_privilege',
        HINT = 'ledger recover moves damaged rows to the evidence table';
END $$
""",
    """
CREATE TRIGGER chain_append_only BEFORE UPDATE OR DELETE ON chain
    FOR EACH ROW EXECUTE FUNCTION refuse_change()
""",
    """
CREATE TRIGGER chain_not_truncated BEFORE TRUNCATE ON chain
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change()
""",
    """
CREATE TRIGGER checkpoints_append_only BEFORE UPDATE OR DELETE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION refuse_change()
""",
    """
CREATE TRIGGER checkpoints_not_truncated BEFORE TRUNCATE ON checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change()
""",
    """
CREATE FUNCTION recover_chain(p_keep bigint, p_reason text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    moved bigint;
BEGIN
    PERFORM set_config('ledger.recovering', 'on', true);
    INSERT INTO evidence (seq, line, reason)
        SELECT seq, line, p_reason FROM chain WHERE seq > p_keep ORDER BY seq;
    GET DIAGNOSTICS moved = ROW_COUNT;
    DELETE FROM chain WHERE seq > p_keep;
    INSERT INTO evidence (seq, line, reason)
        SELECT entries, document, 'a checkpoint of entries no longer in the chain'
        FROM checkpoints c WHERE NOT EXISTS (
            SELECT 1 FROM chain WHERE seq = c.entries AND entry_hash = c.head_hash
        ) ORDER BY id;
    DELETE FROM checkpoints c WHERE NOT EXISTS (
        SELECT 1 FROM chain WHERE seq = c.entries AND entry_hash = c.head_hash
    );
    DELETE FROM chain_tampered;
    PERFORM set_config('ledger.recovering', '', true);
    RETURN moved;
END $$
""",
    "REVOKE ALL ON FUNCTION recover_chain(bigint, text) FROM PUBLIC",
    # Derived state is MAC'd from version 2 on: the old rows are rebuilt from the chain.
    "DELETE FROM derived_state",
    "DELETE FROM idempotency_keys",
)


_VERSION_3 = (
    """
CREATE TABLE gateway_keys (
    name text PRIMARY KEY,
    agent text,
    tags text[] NOT NULL DEFAULT '{}',
    expires text,
    created text NOT NULL,
    revoked_at text,
    sha256 text NOT NULL UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    mac text NOT NULL
)
""",
)


_VERSION_4 = ("ALTER TABLE gateway_keys ADD COLUMN role text CHECK (role IN ('admin', 'viewer'))",)


_VERSION_5 = (
    """
CREATE TABLE segments (
    number bigint PRIMARY KEY CHECK (number >= 1),
    first_seq bigint NOT NULL CHECK (first_seq >= 1),
    last_seq bigint NOT NULL UNIQUE CHECK (last_seq >= first_seq),
    end_pos bigint NOT NULL,
    head_hash text NOT NULL,
    checkpoint bytea NOT NULL,
    sealed_at timestamptz NOT NULL DEFAULT now()
)
""",
    """
CREATE TRIGGER segments_append_only BEFORE UPDATE OR DELETE ON segments
    FOR EACH ROW EXECUTE FUNCTION refuse_change()
""",
    """
CREATE TRIGGER segments_not_truncated BEFORE TRUNCATE ON segments
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change()
""",
    # Version 2's function, which now also retires the seals of the rows it moves.
    """
CREATE OR REPLACE FUNCTION recover_chain(p_keep bigint, p_reason text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    moved bigint;
BEGIN
    PERFORM set_config('ledger.recovering', 'on', true);
    INSERT INTO evidence (seq, line, reason)
        SELECT seq, line, p_reason FROM chain WHERE seq > p_keep ORDER BY seq;
    GET DIAGNOSTICS moved = ROW_COUNT;
    DELETE FROM chain WHERE seq > p_keep;
    INSERT INTO evidence (seq, line, reason)
        SELECT entries, document, 'a checkpoint of entries no longer in the chain'
        FROM checkpoints c WHERE NOT EXISTS (
            SELECT 1 FROM chain WHERE seq = c.entries AND entry_hash = c.head_hash
        ) ORDER BY id;
    DELETE FROM checkpoints c WHERE NOT EXISTS (
        SELECT 1 FROM chain WHERE seq = c.entries AND entry_hash = c.head_hash
    );
    INSERT INTO evidence (seq, line, reason)
        SELECT last_seq, checkpoint, 'the seal of a segment no longer in the chain'
        FROM segments WHERE last_seq > p_keep ORDER BY number;
    DELETE FROM segments WHERE last_seq > p_keep;
    DELETE FROM chain_tampered;
    PERFORM set_config('ledger.recovering', '', true);
    RETURN moved;
END $$
""",
)


def schema_statements(
    schema: str, *, create_schema: bool, from_version: int = 0, to_version: int = 5
) -> list[str]:
    """The statements bringing ``schema`` (a checked identifier) from one version to another.

    ``from_version`` 0 creates everything; ``to_version`` is the newest by
    default. The ``SECURITY DEFINER`` functions run with their owner's rights
    and a fixed ``search_path``: a role that may not write ``chain_tampered``
    still leaves its note there, and only ``recover_chain`` may move rows out
    of ``chain``.
    """
    statements = [f'CREATE SCHEMA "{schema}"'] if create_schema else []
    if from_version < 1 <= to_version:
        statements += [statement.strip() for statement in _VERSION_1]
        statements.append(
            f'ALTER FUNCTION note_chain_change() SET search_path = "{schema}", pg_temp'
        )
    if from_version < 2 <= to_version:  # noqa: PLR2004 - the schema's versions
        statements += [statement.strip() for statement in _VERSION_2]
        statements.append(
            f'ALTER FUNCTION recover_chain(bigint, text) SET search_path = "{schema}", pg_temp'
        )
        statements.append(f'ALTER FUNCTION refuse_change() SET search_path = "{schema}", pg_temp')
    if from_version < 3 <= to_version:  # noqa: PLR2004 - the schema's versions
        statements += [statement.strip() for statement in _VERSION_3]
    if from_version < 4 <= to_version:  # noqa: PLR2004 - the schema's versions
        statements += [statement.strip() for statement in _VERSION_4]
    if from_version < 5 <= to_version:  # noqa: PLR2004 - the schema's versions
        statements += [statement.strip() for statement in _VERSION_5]
        statements.append(
            f'ALTER FUNCTION recover_chain(bigint, text) SET search_path = "{schema}", pg_temp'
        )
    return statements
