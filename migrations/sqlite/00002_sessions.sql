-- +goose Up
CREATE TABLE sessions (
  id                      TEXT NOT NULL,
  token_hash              BLOB NOT NULL,
  link_id                 TEXT NOT NULL,
  grant_id                TEXT NOT NULL,
  account_id              TEXT NULL,
  bucket                  TEXT NOT NULL,
  object_key              TEXT NOT NULL,
  version_id              TEXT NOT NULL,
  size                    INTEGER NOT NULL,
  etag                    TEXT NOT NULL,
  content_type            TEXT NOT NULL,
  last_modified           INTEGER NULL,
  filename                TEXT NOT NULL,
  byte_budget             INTEGER NOT NULL,
  bytes_drawn             INTEGER NOT NULL DEFAULT 0,
  -- last_draw holds the amount granted by the latest DrawBytes, read
  -- back with RETURNING in the same statement.
  last_draw               INTEGER NOT NULL DEFAULT 0,
  max_concurrency         INT NOT NULL,
  expires_at              INTEGER NOT NULL,
  revoked_at              INTEGER NULL,
  ended_at                INTEGER NULL,
  created_at              INTEGER NOT NULL,
  PRIMARY KEY (id),
  CONSTRAINT sessions_token_hash UNIQUE (token_hash),
  CONSTRAINT sessions_link FOREIGN KEY (link_id) REFERENCES links (id),
  CONSTRAINT sessions_budget_range CHECK (bytes_drawn >= 0 AND bytes_drawn <= byte_budget),
  CONSTRAINT sessions_concurrency_positive CHECK (max_concurrency >= 1)
);
CREATE INDEX sessions_link ON sessions (link_id);
CREATE INDEX sessions_open_expiry ON sessions (ended_at, expires_at);

-- One row per slot, created with the session: acquiring is a single
-- UPDATE of a free or lapsed row, so the cap is a row count, not a counter.
CREATE TABLE session_slots (
  session_id              TEXT NOT NULL,
  slot                    INT NOT NULL,
  holder                  TEXT NULL,
  lease_until             INTEGER NOT NULL,
  PRIMARY KEY (session_id, slot),
  CONSTRAINT session_slots_session FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
);
CREATE INDEX session_slots_holder ON session_slots (session_id, holder);
CREATE INDEX session_slots_lapsed ON session_slots (lease_until);

-- Idempotency keys of session mints, scoped to (link, account or '').
-- The primary key makes a concurrent duplicate wait for the first one's
-- outcome (SQLite serializes writers) instead of an application map.
CREATE TABLE session_idempotency (
  link_id                 TEXT NOT NULL,
  scope                   TEXT NOT NULL,
  idem_key                TEXT NOT NULL,
  session_id              TEXT NOT NULL,
  created_at              INTEGER NOT NULL,
  PRIMARY KEY (link_id, scope, idem_key),
  CONSTRAINT session_idempotency_link FOREIGN KEY (link_id) REFERENCES links (id)
);

-- +goose Down
DROP TABLE session_idempotency;
DROP TABLE session_slots;
DROP TABLE sessions;
