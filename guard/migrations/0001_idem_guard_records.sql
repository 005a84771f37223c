-- idem-guard: one row per idempotency key.
-- Safe to run more than once; PostgresStore::connect runs it under an advisory lock. To manage it
-- with your own migrations instead, copy this file and build the store with `from_pool_unmigrated`.
CREATE TABLE IF NOT EXISTS idem_guard_records (
    key         text        PRIMARY KEY,
    -- Fencing token of the attempt that holds (or completed) the record.
    owner       text        NOT NULL,
    -- Hex xxh3-128 of the payload; a reuse of the key with another payload is rejected.
    fingerprint text        NOT NULL,
    -- 0 in progress, 1 completed ok, 2 completed with a cached error, 3 completed unreplayable.
    state       smallint    NOT NULL,
    -- JSON of the stored result once completed.
    body        text,
    -- End of the lease (in progress) or of the retention (completed); an expired row is free.
    expires_at  timestamptz NOT NULL
);
-- For PostgresStore::purge_expired.
CREATE INDEX IF NOT EXISTS idem_guard_records_expires_at ON idem_guard_records (expires_at);
