-- +goose Up
-- SQLite twin of migrations/mysql/00006.
ALTER TABLE sessions ADD COLUMN affinity_reuses INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN affinity_reuses;
