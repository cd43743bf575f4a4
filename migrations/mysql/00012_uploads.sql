-- +goose Up
-- Resumable uploads (SPEC §11, docs/design.md "Resumable uploads"): one
-- row per tus upload, where every gateway process finds how far it is.
-- upload_offset is how many bytes the store holds; sha256_state the state
-- of their SHA-256 (crypto/sha256's marshaled digest, 108 bytes) and
-- store_state the store's own at that offset (S3: the multipart upload id
-- and each part's ETag and checksum, about 100 bytes a part, so up to a
-- megabyte for 10,000 parts: MEDIUMBLOB). holder and lease_until are the
-- upload's lock, a lease like a session slot's (lease_until in 1970 when
-- free). state is 'active' until the upload became a version
-- (version_id, etag, sha256), then 'finished'; expires_at says when an
-- active upload is given up and a finished one forgotten, and one index
-- on (state, expires_at) serves both sweeps. No CHECK constraint: TiDB
-- ignores them, and nothing rests on one.
CREATE TABLE uploads (
  id            VARCHAR(36)    NOT NULL,
  bucket        VARCHAR(255)   NOT NULL,
  object_key    VARCHAR(1024)  NOT NULL,
  filename      VARCHAR(1024)  NULL,
  content_type  VARCHAR(255)   NOT NULL,
  size          BIGINT         NOT NULL,
  part_size     BIGINT         NOT NULL,
  upload_offset BIGINT         NOT NULL DEFAULT 0,
  sha256_state  VARBINARY(255) NOT NULL,
  store_state   MEDIUMBLOB     NOT NULL,
  state         VARCHAR(16)    NOT NULL DEFAULT 'active',
  created_at    DATETIME(6)    NOT NULL,
  expires_at    DATETIME(6)    NOT NULL,
  finished_at   DATETIME(6)    NULL,
  version_id    VARCHAR(1024)  NULL,
  etag          VARCHAR(255)   NULL,
  sha256        CHAR(64)       NULL,
  holder        VARCHAR(64)    NULL,
  lease_until   DATETIME(6)    NOT NULL,
  PRIMARY KEY (id),
  KEY uploads_due (state, expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE uploads;
