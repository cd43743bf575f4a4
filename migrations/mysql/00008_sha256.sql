-- +goose Up
-- The SHA-256 of an object version (SPEC §10, docs/design.md "Verified
-- downloads"), lowercase hex; NULL when unknown (a version stored before
-- the gateway computed digests, until `gateway objects digest` fills it
-- in, or a foreign object whose store keeps no full-object SHA-256).
-- objects holds what the gateway computed while uploading; links and
-- sessions copy it with the rest of the version they pin, so that a
-- download reads it from the row it already reads. One column per ALTER:
-- plain ADD COLUMN, which MySQL 8.4, MariaDB 10.11 and TiDB 8.5 all
-- accept.
ALTER TABLE objects ADD COLUMN sha256 CHAR(64) NULL;
ALTER TABLE links ADD COLUMN sha256 CHAR(64) NULL;
ALTER TABLE sessions ADD COLUMN sha256 CHAR(64) NULL;

-- +goose Down
ALTER TABLE sessions DROP COLUMN sha256;
ALTER TABLE links DROP COLUMN sha256;
ALTER TABLE objects DROP COLUMN sha256;
