-- +goose Up
CREATE TABLE sessions (
  id              CHAR(36)      NOT NULL,
  token_hash      BINARY(32)    NOT NULL,
  link_id         CHAR(36)      NOT NULL,
  grant_id        CHAR(36)      NOT NULL,
  account_id      VARCHAR(255)  NULL,
  bucket          VARCHAR(255)  NOT NULL,
  object_key      VARCHAR(1024) NOT NULL,
  version_id      VARCHAR(1024) NOT NULL,
  size            BIGINT        NOT NULL,
  etag            VARCHAR(255)  NOT NULL,
  content_type    VARCHAR(255)  NOT NULL,
  last_modified   DATETIME(6)   NULL,
  filename        VARCHAR(1024) NOT NULL,
  byte_budget     BIGINT        NOT NULL,
  bytes_drawn     BIGINT        NOT NULL DEFAULT 0,
  max_concurrency INT           NOT NULL,
  expires_at      DATETIME(6)   NOT NULL,
  revoked_at      DATETIME(6)   NULL,
  ended_at        DATETIME(6)   NULL,
  created_at      DATETIME(6)   NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY sessions_token_hash (token_hash),
  KEY sessions_link (link_id),
  KEY sessions_open_expiry (ended_at, expires_at),
  CONSTRAINT sessions_link FOREIGN KEY (link_id) REFERENCES links (id),
  CONSTRAINT sessions_budget_range CHECK (bytes_drawn >= 0 AND bytes_drawn <= byte_budget),
  CONSTRAINT sessions_concurrency_positive CHECK (max_concurrency >= 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per slot, created with the session: acquiring is a single
-- UPDATE of a free or lapsed row, so the cap is a row count, not a counter.
CREATE TABLE session_slots (
  session_id  CHAR(36)    NOT NULL,
  slot        INT         NOT NULL,
  holder      CHAR(36)    NULL,
  lease_until DATETIME(6) NOT NULL,
  PRIMARY KEY (session_id, slot),
  KEY session_slots_holder (session_id, holder),
  KEY session_slots_lapsed (lease_until),
  CONSTRAINT session_slots_session FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Idempotency keys of session mints, scoped to (link, account or '').
-- The primary key makes concurrent duplicates wait for the first one's
-- outcome inside InnoDB instead of in an application map.
CREATE TABLE session_idempotency (
  link_id    CHAR(36)     NOT NULL,
  scope      VARCHAR(255) NOT NULL,
  idem_key   VARCHAR(255) NOT NULL,
  session_id CHAR(36)     NOT NULL,
  created_at DATETIME(6)  NOT NULL,
  PRIMARY KEY (link_id, scope, idem_key),
  CONSTRAINT session_idempotency_link FOREIGN KEY (link_id) REFERENCES links (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE session_idempotency;
DROP TABLE session_slots;
DROP TABLE sessions;
