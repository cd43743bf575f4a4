-- +goose Up
-- The admin listing (SPEC §6) reads links newest first, (created_at, id)
-- descending, and each filter has an index that starts with the filtered
-- column and continues in that order (descending, so the scan runs forward
-- and MariaDB keeps index condition pushdown): a page is one index range
-- scan from the cursor, stopped by LIMIT, never a sort.
--
-- A link's state depends on the clock, so no index can hold it. What does
-- not move is revocation: is_revoked splits revoked links from the rest;
-- for expired, exhausted and active the scan of is_revoked = 0 checks
-- expires_at and remaining in the index entry itself, without reading the
-- row. The account and object indexes carry the same columns, so a state
-- filter combined with them is checked the same way.
--
-- object_key is VARCHAR(1024) utf8mb4, up to 4096 bytes, over InnoDB's
-- 3072-byte key limit, so its index is on the first 700 characters; the
-- equality is still checked on the row, and rows whose keys share those
-- characters stay in (created_at, id) order.
--
-- is_revoked is VIRTUAL and its keys come in a second statement, which
-- MySQL 8.4, MariaDB 10.11 and TiDB 8.5 all accept: TiDB cannot add a
-- STORED generated column to an existing table (error 3106), nor index a
-- column in the ALTER that adds it (error 1072). The keys store its value,
-- so the listing reads it from the index entry as it did from a STORED
-- column; databases migrated before keep their STORED column, with the
-- same keys and the same values.
ALTER TABLE links ADD COLUMN is_revoked BOOLEAN AS (revoked_at IS NOT NULL) VIRTUAL;
ALTER TABLE links
  ADD KEY links_created (created_at DESC, id DESC),
  ADD KEY links_account_created (account_id, created_at DESC, id DESC, is_revoked, expires_at, remaining),
  ADD KEY links_object_created (object_key(700), created_at DESC, id DESC, is_revoked, expires_at, remaining),
  ADD KEY links_state_created (is_revoked, created_at DESC, id DESC, expires_at, remaining);

-- +goose Down
ALTER TABLE links
  DROP KEY links_state_created,
  DROP KEY links_object_created,
  DROP KEY links_account_created,
  DROP KEY links_created;
ALTER TABLE links DROP COLUMN is_revoked;
