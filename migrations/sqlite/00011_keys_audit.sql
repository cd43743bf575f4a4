-- +goose Up
-- SQLite twin of migrations/mysql/00011 (the comments there explain the
-- tables): operators' keys, the audit trail, console sessions.
CREATE TABLE api_keys (
  id           TEXT NOT NULL,
  name         TEXT NOT NULL,
  secret_hash  BLOB NOT NULL,
  scopes       TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NULL,
  revoked_at   INTEGER NULL,
  last_used_at INTEGER NULL,
  PRIMARY KEY (id),
  CONSTRAINT api_keys_secret_hash UNIQUE (secret_hash)
);
CREATE INDEX api_keys_created ON api_keys (created_at DESC, id DESC);
CREATE INDEX api_keys_revoked ON api_keys (revoked_at);
CREATE INDEX api_keys_expires ON api_keys (expires_at);

CREATE TABLE audit_entries (
  id             TEXT NOT NULL,
  created_at     INTEGER NOT NULL,
  actor_key_id   TEXT NOT NULL,
  actor_key_name TEXT NOT NULL,
  action         TEXT NOT NULL,
  target_type    TEXT NOT NULL,
  target_id      TEXT NOT NULL,
  request_id     TEXT NULL,
  details        TEXT NOT NULL,
  PRIMARY KEY (id)
);
CREATE INDEX audit_created ON audit_entries (created_at DESC, id DESC);
CREATE INDEX audit_actor_created ON audit_entries (actor_key_id, created_at DESC, id DESC, action);
CREATE INDEX audit_action_created ON audit_entries (action, created_at DESC, id DESC, actor_key_id);
CREATE INDEX audit_target_created ON audit_entries (target_id, created_at DESC, id DESC);

CREATE TABLE console_sessions (
  id           TEXT NOT NULL,
  secret_hash  BLOB NOT NULL,
  key_id       TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  PRIMARY KEY (id),
  CONSTRAINT console_sessions_secret_hash UNIQUE (secret_hash)
);
CREATE INDEX console_sessions_key ON console_sessions (key_id);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
CREATE INDEX console_sessions_seen ON console_sessions (last_seen_at);

ALTER TABLE objects ADD COLUMN decided_by_key_id TEXT NULL;
ALTER TABLE objects ADD COLUMN decided_by_key_name TEXT NULL;

-- +goose Down
ALTER TABLE objects DROP COLUMN decided_by_key_name;
ALTER TABLE objects DROP COLUMN decided_by_key_id;
DROP TABLE console_sessions;
DROP TABLE audit_entries;
DROP TABLE api_keys;
