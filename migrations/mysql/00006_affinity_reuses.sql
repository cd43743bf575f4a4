-- +goose Up
-- How many requests session affinity (SPEC §5) sent to a session instead
-- of claiming again; the admin API shows it on the session's grant.
ALTER TABLE sessions ADD COLUMN affinity_reuses BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN affinity_reuses;
