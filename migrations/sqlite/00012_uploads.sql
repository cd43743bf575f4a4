-- +goose Up
-- SQLite twin of migrations/mysql/00012: resumable uploads. See the MySQL
-- file for what each column means.
CREATE TABLE uploads (
  id            TEXT    NOT NULL,
  bucket        TEXT    NOT NULL,
  object_key    TEXT    NOT NULL,
  filename      TEXT    NULL,
  content_type  TEXT    NOT NULL,
  size          INTEGER NOT NULL,
  part_size     INTEGER NOT NULL,
  upload_offset INTEGER NOT NULL DEFAULT 0,
  sha256_state  BLOB    NOT NULL,
  store_state   BLOB    NOT NULL,
  state         TEXT    NOT NULL DEFAULT 'active',
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  finished_at   INTEGER NULL,
  version_id    TEXT    NULL,
  etag          TEXT    NULL,
  sha256        TEXT    NULL,
  holder        TEXT    NULL,
  lease_until   INTEGER NOT NULL,
  PRIMARY KEY (id)
);
CREATE INDEX uploads_due ON uploads (state, expires_at);

-- +goose Down
DROP INDEX uploads_due;
DROP TABLE uploads;
