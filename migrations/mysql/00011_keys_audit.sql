-- +goose Up
-- Operators' keys, the audit trail and console sessions (SPEC §6 "Keys and
-- scopes", "Audit"; §11). Portable to MySQL 8.4, MariaDB 10.11 and TiDB
-- 8.5 as the other migrations are: new tables with their keys in CREATE
-- TABLE, and one column per ALTER.
--
-- api_keys holds a key's SHA-256 only (secret_hash), never its text.
-- scopes is the space-separated canonical list apikey.Scopes writes.
-- last_used_at is written at most once a minute per key, by a conditional
-- UPDATE that only matches a row last used a minute or more ago (KeyTouch).
-- The listing reads (created_at, id) descending, as the links listing does;
-- the purge finds dead keys by revoked_at and expires_at.
CREATE TABLE api_keys (
  id           CHAR(36)     NOT NULL,
  name         VARCHAR(255) NOT NULL,
  secret_hash  BINARY(32)   NOT NULL,
  scopes       VARCHAR(255) NOT NULL,
  created_at   DATETIME(6)  NOT NULL,
  expires_at   DATETIME(6)  NULL,
  revoked_at   DATETIME(6)  NULL,
  last_used_at DATETIME(6)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY api_keys_secret_hash (secret_hash),
  KEY api_keys_created (created_at DESC, id DESC),
  KEY api_keys_revoked (revoked_at),
  KEY api_keys_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per change made through the admin API, written in the change's
-- transaction. The actor's key name is copied, so an entry still names it
-- after the key is purged; actor_key_id is 'bootstrap' for the admin
-- token. details is JSON and never holds a secret.
--
-- GET /v1/audit reads newest first, (created_at, id) descending, and each
-- filter has an index that starts with the filtered column and continues
-- in that order, so a page is one index range scan from the cursor, never
-- a sort (as links_*_created, migration 00003). The actor and action
-- indexes carry the other column, so the two filters together are checked
-- in the index entry. target_id is an object's key for objects, up to 1024
-- characters: its index is on the first 700 (InnoDB's 3072-byte limit),
-- and the equality is checked on the row.
CREATE TABLE audit_entries (
  id             CHAR(36)      NOT NULL,
  created_at     DATETIME(6)   NOT NULL,
  actor_key_id   VARCHAR(36)   NOT NULL,
  actor_key_name VARCHAR(255)  NOT NULL,
  action         VARCHAR(32)   NOT NULL,
  target_type    VARCHAR(16)   NOT NULL,
  target_id      VARCHAR(1024) NOT NULL,
  request_id     VARCHAR(64)   NULL,
  details        TEXT          NOT NULL,
  PRIMARY KEY (id),
  KEY audit_created (created_at DESC, id DESC),
  KEY audit_actor_created (actor_key_id, created_at DESC, id DESC, action),
  KEY audit_action_created (action, created_at DESC, id DESC, actor_key_id),
  KEY audit_target_created (target_id(700), created_at DESC, id DESC)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Server-side console sessions (SPEC §11), kept here so that any gateway
-- process serves a signed-in console and a sign-out (a DELETE) ends it on
-- all of them. secret_hash is the SHA-256 of the cookie's value.
-- expires_at is the absolute end (12 h); last_seen_at, moved at most once a
-- minute, starts the idle timeout (1 h). key_id names an api_keys row, or
-- is 'bootstrap' for the admin token, hence no foreign key.
CREATE TABLE console_sessions (
  id           CHAR(36)    NOT NULL,
  secret_hash  BINARY(32)  NOT NULL,
  key_id       VARCHAR(36) NOT NULL,
  created_at   DATETIME(6) NOT NULL,
  expires_at   DATETIME(6) NOT NULL,
  last_seen_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY console_sessions_secret_hash (secret_hash),
  KEY console_sessions_key (key_id),
  KEY console_sessions_expires (expires_at),
  KEY console_sessions_seen (last_seen_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Who decided a version's deletion (DeletionBegin through the admin API),
-- so that its object.deleted event names that actor whichever process
-- finishes the deletion; NULL when retention decided it.
ALTER TABLE objects ADD COLUMN decided_by_key_id VARCHAR(36) NULL;
ALTER TABLE objects ADD COLUMN decided_by_key_name VARCHAR(255) NULL;

-- +goose Down
ALTER TABLE objects DROP COLUMN decided_by_key_name;
ALTER TABLE objects DROP COLUMN decided_by_key_id;
DROP TABLE console_sessions;
DROP TABLE audit_entries;
DROP TABLE api_keys;
