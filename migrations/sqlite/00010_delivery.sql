-- +goose Up
-- SQLite twin of migrations/mysql/00010 (the comments there explain the
-- columns). SQLite cannot add a CHECK constraint to an existing table;
-- the MySQL ones are documentation there too (docs/design.md "Engines").
ALTER TABLE links ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN delivery_status TEXT NOT NULL DEFAULT 'none';
ALTER TABLE grants ADD COLUMN bytes_acked INTEGER NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN delivery_written INTEGER NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN delivered_at INTEGER NULL;
ALTER TABLE grants ADD COLUMN interrupted_at INTEGER NULL;
ALTER TABLE grants ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
ALTER TABLE grants ADD COLUMN attempts_ended INTEGER NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN attempt_until INTEGER NULL;
ALTER TABLE grants ADD COLUMN client_keys TEXT NULL;
ALTER TABLE sessions ADD COLUMN coverage TEXT NULL;
ALTER TABLE sessions ADD COLUMN delivery_written INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN reported_at INTEGER NULL;
CREATE INDEX grants_link_delivery ON grants (link_id, delivery_status, created_at, id);

-- +goose Down
DROP INDEX grants_link_delivery;
ALTER TABLE sessions DROP COLUMN reported_at;
ALTER TABLE sessions DROP COLUMN delivery_written;
ALTER TABLE sessions DROP COLUMN coverage;
ALTER TABLE grants DROP COLUMN client_keys;
ALTER TABLE grants DROP COLUMN attempt_until;
ALTER TABLE grants DROP COLUMN attempts_ended;
ALTER TABLE grants DROP COLUMN attempts;
ALTER TABLE grants DROP COLUMN interrupted_at;
ALTER TABLE grants DROP COLUMN delivered_at;
ALTER TABLE grants DROP COLUMN delivery_written;
ALTER TABLE grants DROP COLUMN bytes_acked;
ALTER TABLE grants DROP COLUMN delivery_status;
ALTER TABLE links DROP COLUMN retries;
