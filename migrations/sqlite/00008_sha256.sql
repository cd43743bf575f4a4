-- +goose Up
-- SQLite twin of migrations/mysql/00008: the SHA-256 of an object version,
-- lowercase hex, NULL when unknown.
ALTER TABLE objects ADD COLUMN sha256 TEXT NULL;
ALTER TABLE links ADD COLUMN sha256 TEXT NULL;
ALTER TABLE sessions ADD COLUMN sha256 TEXT NULL;

-- +goose Down
ALTER TABLE sessions DROP COLUMN sha256;
ALTER TABLE links DROP COLUMN sha256;
ALTER TABLE objects DROP COLUMN sha256;
