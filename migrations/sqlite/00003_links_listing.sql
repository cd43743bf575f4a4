-- +goose Up
-- SQLite twin of migrations/mysql/00003: one index per listing filter, each
-- continuing in (created_at, id) order so a page needs no sort. SQLite can
-- only add a VIRTUAL generated column; indexing it stores its value.
ALTER TABLE links ADD COLUMN is_revoked INTEGER GENERATED ALWAYS AS (revoked_at IS NOT NULL) VIRTUAL;
CREATE INDEX links_created ON links (created_at DESC, id DESC);
CREATE INDEX links_account_created ON links (account_id, created_at DESC, id DESC, is_revoked, expires_at, remaining);
CREATE INDEX links_object_created ON links (object_key, created_at DESC, id DESC, is_revoked, expires_at, remaining);
CREATE INDEX links_state_created ON links (is_revoked, created_at DESC, id DESC, expires_at, remaining);

-- +goose Down
DROP INDEX links_state_created;
DROP INDEX links_object_created;
DROP INDEX links_account_created;
DROP INDEX links_created;
ALTER TABLE links DROP COLUMN is_revoked;
