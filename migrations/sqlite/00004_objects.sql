-- +goose Up
-- SQLite twin of migrations/mysql/00004: the object versions the gateway
-- stored itself, the only ones it ever deletes. See the MySQL file for
-- what each column means.
CREATE TABLE objects (
  version_hash BLOB NOT NULL,
  bucket       TEXT NOT NULL,
  object_key   TEXT NOT NULL,
  version_id   TEXT NOT NULL,
  size         INTEGER NOT NULL,
  etag         TEXT NOT NULL,
  content_type TEXT NOT NULL,
  stored_at    INTEGER NOT NULL,
  state        TEXT NOT NULL DEFAULT 'stored',
  check_at     INTEGER NOT NULL,
  linked_at    INTEGER NULL,
  released_at  INTEGER NULL,
  decided_at   INTEGER NULL,
  attempts     INT NOT NULL DEFAULT 0,
  last_error   TEXT NULL,
  deleted_at   INTEGER NULL,
  PRIMARY KEY (version_hash),
  CONSTRAINT objects_state_known CHECK (state IN ('stored', 'deleting', 'deleted'))
);
CREATE INDEX objects_due ON objects (state, check_at);

CREATE INDEX links_revoked ON links (revoked_at);
CREATE INDEX links_expires ON links (expires_at);

-- +goose Down
DROP INDEX links_expires;
DROP INDEX links_revoked;
DROP TABLE objects;
