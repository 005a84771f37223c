-- idem-guard (MySQL, MariaDB): one row per idempotency key, in the connection's database.
-- Safe to run more than once; MySqlStore::connect runs it. To manage it with your own
-- migrations instead, copy this file and build the store with `from_pool_unmigrated`.
CREATE TABLE IF NOT EXISTS idem_guard_records (
    -- Bytes, compared as bytes: a case- or accent-insensitive collation would make two keys one.
    -- 1024 is idem_guard::MAX_KEY_LEN.
    `key`       VARBINARY(1024) NOT NULL PRIMARY KEY,
    -- Fencing token of the attempt that holds (or completed) the record.
    owner       CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- Hex xxh3-128 of the payload; a reuse of the key with another payload is rejected.
    fingerprint CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- 0 in progress, 1 completed ok, 2 completed with a cached error, 3 completed unreplayable.
    state       TINYINT NOT NULL,
    -- The stored result once completed.
    body        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    -- End of the lease (in progress) or of the retention (completed), UTC, by the server's
    -- clock (`UTC_TIMESTAMP(6)`); an expired row is free.
    expires_at  DATETIME(6) NOT NULL,
    KEY idem_guard_records_expires_at (expires_at)
) ENGINE = InnoDB;
