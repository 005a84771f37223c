-- idem-guard (SQLite): one row per idempotency key.
-- Safe to run more than once; SqliteStore::connect runs it. To manage it with your own
-- migrations instead, copy this file and build the store with `from_pool_unmigrated`.
CREATE TABLE IF NOT EXISTS idem_guard_records (
    key         TEXT    PRIMARY KEY NOT NULL,
    -- Fencing token of the attempt that holds (or completed) the record.
    owner       TEXT    NOT NULL,
    -- Hex xxh3-128 of the payload; a reuse of the key with another payload is rejected.
    fingerprint TEXT    NOT NULL,
    -- 0 in progress, 1 completed ok, 2 completed with a cached error, 3 completed unreplayable.
    state       INTEGER NOT NULL,
    -- The stored result once completed.
    body        TEXT,
    -- End of the lease (in progress) or of the retention (completed), in Unix milliseconds of
    -- SQLite's clock (`julianday('now')`); an expired row is free.
    expires_at  INTEGER NOT NULL
);
-- For SqliteStore::purge_expired.
CREATE INDEX IF NOT EXISTS idem_guard_records_expires_at ON idem_guard_records (expires_at);
