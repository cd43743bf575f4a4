-- +goose Up
-- Portable to MySQL 8.4 and MariaDB 10.11: InnoDB, DATETIME(6) in UTC
-- (the driver connects with loc=UTC and time_zone='+00:00'), CHECK
-- constraints (enforced since MySQL 8.0.16 and MariaDB 10.2).
CREATE TABLE links (
  id                      CHAR(36)      NOT NULL,
  token_hash              BINARY(32)    NOT NULL,
  bucket                  VARCHAR(255)  NOT NULL,
  object_key              VARCHAR(1024) NOT NULL,
  version_id              VARCHAR(1024) NOT NULL,
  size                    BIGINT        NOT NULL,
  etag                    VARCHAR(255)  NOT NULL,
  content_type            VARCHAR(255)  NOT NULL,
  last_modified           DATETIME(6)   NULL,
  filename                VARCHAR(1024) NOT NULL,
  account_id              VARCHAR(255)  NULL,
  allowance               INT           NOT NULL,
  remaining               INT           NOT NULL,
  expires_at              DATETIME(6)   NOT NULL,
  revoked_at              DATETIME(6)   NULL,
  created_at              DATETIME(6)   NOT NULL,
  delivery                VARCHAR(16)   NOT NULL,
  confirm                 BOOLEAN       NOT NULL DEFAULT FALSE,
  session_ttl_ms          BIGINT        NOT NULL DEFAULT 0,
  session_byte_budget     BIGINT        NOT NULL DEFAULT 0,
  session_max_concurrency INT           NOT NULL DEFAULT 0,
  idempotency_key         VARCHAR(255)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY links_token_hash (token_hash),
  UNIQUE KEY links_idempotency_key (idempotency_key),
  CONSTRAINT links_remaining_range CHECK (remaining >= 0 AND remaining <= allowance),
  CONSTRAINT links_allowance_positive CHECK (allowance >= 1),
  CONSTRAINT links_delivery_known CHECK (delivery IN ('stream', 'session'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE grants (
  id          CHAR(36)     NOT NULL,
  link_id     CHAR(36)     NOT NULL,
  kind        VARCHAR(16)  NOT NULL,
  account_id  VARCHAR(255) NULL,
  status      VARCHAR(16)  NOT NULL,
  created_at  DATETIME(6)  NOT NULL,
  refunded_at DATETIME(6)  NULL,
  client      VARCHAR(255) NOT NULL,
  session_id  CHAR(36)     NULL,
  PRIMARY KEY (id),
  KEY grants_link_created (link_id, created_at, id),
  CONSTRAINT grants_link FOREIGN KEY (link_id) REFERENCES links (id),
  CONSTRAINT grants_status_known CHECK (status IN ('granted', 'refunded')),
  CONSTRAINT grants_kind_known CHECK (kind IN ('stream', 'session'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE allowance_changes (
  id         CHAR(36)      NOT NULL,
  link_id    CHAR(36)      NOT NULL,
  added      INT           NOT NULL,
  reason     VARCHAR(1024) NOT NULL,
  created_at DATETIME(6)   NOT NULL,
  PRIMARY KEY (id),
  KEY allowance_changes_link (link_id, created_at),
  CONSTRAINT allowance_changes_link FOREIGN KEY (link_id) REFERENCES links (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE allowance_changes;
DROP TABLE grants;
DROP TABLE links;
