-- +goose Up
-- SQLite twin of migrations/mysql/00013 (the comment there explains the
-- indexes): the console's objects page, newest first.
CREATE INDEX objects_stored ON objects (stored_at DESC, version_hash DESC);
CREATE INDEX objects_state_stored ON objects (state, stored_at DESC, version_hash DESC);

-- +goose Down
DROP INDEX objects_state_stored;
DROP INDEX objects_stored;
