-- +goose Up
-- SQLite twin of migrations/mysql: times are INTEGER microseconds since the
-- Unix epoch (UTC), so comparisons are exact and ordered.
CREATE TABLE links (
  id                      TEXT NOT NULL,
  token_hash              BLOB NOT NULL,
  bucket                  TEXT NOT NULL,
  object_key              TEXT NOT NULL,
  version_id              TEXT NOT NULL,
  size                    INTEGER NOT NULL,
  etag                    TEXT NOT NULL,
  content_type            TEXT NOT NULL,
  last_modified           INTEGER NULL,
  filename                TEXT NOT NULL,
  account_id              TEXT NULL,
  allowance               INT NOT NULL,
  remaining               INT NOT NULL,
  expires_at              INTEGER NOT NULL,
  revoked_at              INTEGER NULL,
  created_at              INTEGER NOT NULL,
  delivery                TEXT NOT NULL,
  confirm                 INTEGER NOT NULL DEFAULT 0,
  session_ttl_ms          INTEGER NOT NULL DEFAULT 0,
  session_byte_budget     INTEGER NOT NULL DEFAULT 0,
  session_max_concurrency INT NOT NULL DEFAULT 0,
  idempotency_key         TEXT NULL,
  PRIMARY KEY (id),
  CONSTRAINT links_token_hash UNIQUE (token_hash),
  CONSTRAINT links_idempotency_key UNIQUE (idempotency_key),
  CONSTRAINT links_remaining_range CHECK (remaining >= 0 AND remaining <= allowance),
  CONSTRAINT links_allowance_positive CHECK (allowance >= 1),
  CONSTRAINT links_delivery_known CHECK (delivery IN ('stream', 'session'))
);

CREATE TABLE grants (
  id                      TEXT NOT NULL,
  link_id                 TEXT NOT NULL,
  kind                    TEXT NOT NULL,
  account_id              TEXT NULL,
  status                  TEXT NOT NULL,
  created_at              INTEGER NOT NULL,
  refunded_at             INTEGER NULL,
  client                  TEXT NOT NULL,
  session_id              TEXT NULL,
  PRIMARY KEY (id),
  CONSTRAINT grants_link FOREIGN KEY (link_id) REFERENCES links (id),
  CONSTRAINT grants_status_known CHECK (status IN ('granted', 'refunded')),
  CONSTRAINT grants_kind_known CHECK (kind IN ('stream', 'session'))
);
CREATE INDEX grants_link_created ON grants (link_id, created_at, id);

CREATE TABLE allowance_changes (
  id                      TEXT NOT NULL,
  link_id                 TEXT NOT NULL,
  added                   INT NOT NULL,
  reason                  TEXT NOT NULL,
  created_at              INTEGER NOT NULL,
  PRIMARY KEY (id),
  CONSTRAINT allowance_changes_link FOREIGN KEY (link_id) REFERENCES links (id)
);
CREATE INDEX allowance_changes_link ON allowance_changes (link_id, created_at);

-- +goose Down
DROP TABLE allowance_changes;
DROP TABLE grants;
DROP TABLE links;
