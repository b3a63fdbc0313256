"""The tables of a fleet's store, version 1 (SPEC §8).

``chain`` holds one row per entry, in chain order: the exact line bytes, the
entry's hash, and the byte offset after the line (``end_pos``), so positions
in the table are the ones a file of the same lines would have. Rows are
meant to be appended only: the ledger role is granted INSERT and SELECT on
it, nothing more. A trigger notes every UPDATE, DELETE or TRUNCATE of the
chain in ``chain_tampered`` (unless ``ledger recover`` is the one changing
it), and the gate halts while a note stands.
"""

_STATEMENTS = (
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


def schema_statements(schema: str, *, create_schema: bool) -> list[str]:
    """The statements creating version 1 in ``schema`` (a checked identifier).

    The function runs with its owner's rights and a fixed ``search_path``, so a
    role that may not write ``chain_tampered`` still leaves its note there.
    """
    statements = [f'CREATE SCHEMA "{schema}"'] if create_schema else []
    statements += [statement.strip() for statement in _STATEMENTS]
    statements.append(f'ALTER FUNCTION note_chain_change() SET search_path = "{schema}", pg_temp')
    return statements
