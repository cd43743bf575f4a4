-- +goose Up
-- The object versions the gateway stored itself (PUT /v1/objects): the
-- only ones it ever deletes (SPEC §6). A version is identified by
-- version_hash, the SHA-256 of bucket, key and version id (separated by
-- NUL, which none of them may contain): the three columns together are
-- far over InnoDB's 3072-byte key limit.
--
-- state moves stored -> deleting -> deleted, and never back, except that
-- a new PUT of an S3 bucket without versioning (version "null") makes the
-- row stored again. check_at says when the sweeper looks at a row next:
-- for stored, when its retention may next be due; for deleting, when the
-- lease of the attempt under way lapses or the backoff after a failed one
-- ends; for deleted, when the tombstone was made. One index on
-- (state, check_at) serves all three scans.
--
-- released_at is the latest death of a link that pinned the version and
-- was purged since: retention counts from it as from a link still there.
CREATE TABLE objects (
  version_hash BINARY(32)    NOT NULL,
  bucket       VARCHAR(255)  NOT NULL,
  object_key   VARCHAR(1024) NOT NULL,
  version_id   VARCHAR(1024) NOT NULL,
  size         BIGINT        NOT NULL,
  etag         VARCHAR(255)  NOT NULL,
  content_type VARCHAR(255)  NOT NULL,
  stored_at    DATETIME(6)   NOT NULL,
  state        VARCHAR(16)   NOT NULL DEFAULT 'stored',
  check_at     DATETIME(6)   NOT NULL,
  linked_at    DATETIME(6)   NULL,
  released_at  DATETIME(6)   NULL,
  decided_at   DATETIME(6)   NULL,
  attempts     INT           NOT NULL DEFAULT 0,
  last_error   VARCHAR(1024) NULL,
  deleted_at   DATETIME(6)   NULL,
  PRIMARY KEY (version_hash),
  KEY objects_due (state, check_at),
  CONSTRAINT objects_state_known CHECK (state IN ('stored', 'deleting', 'deleted'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The audit purge finds dead links by when they died: revoked_at or
-- expires_at, each a range scan from the oldest.
ALTER TABLE links
  ADD KEY links_revoked (revoked_at),
  ADD KEY links_expires (expires_at);

-- +goose Down
ALTER TABLE links
  DROP KEY links_expires,
  DROP KEY links_revoked;
DROP TABLE objects;
