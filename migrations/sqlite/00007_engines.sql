-- +goose Up
-- SQLite twin of migrations/mysql/00007 (the comments there explain the
-- columns).
ALTER TABLE links ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_outbox ADD COLUMN link_seq INTEGER NULL;
ALTER TABLE webhook_outbox ADD COLUMN lease_id TEXT NULL;
ALTER TABLE objects ADD COLUMN lease_id TEXT NULL;
UPDATE webhook_outbox SET link_seq = seq WHERE link_id IS NOT NULL;
UPDATE links SET event_seq = (SELECT MAX(o.seq) FROM webhook_outbox o WHERE o.link_id = links.id)
 WHERE id IN (SELECT link_id FROM webhook_outbox WHERE link_id IS NOT NULL);
CREATE INDEX outbox_link_seq ON webhook_outbox (link_id, status, link_seq);
DROP INDEX outbox_link;

-- +goose Down
CREATE INDEX outbox_link ON webhook_outbox (link_id, status, seq);
DROP INDEX outbox_link_seq;
ALTER TABLE objects DROP COLUMN lease_id;
ALTER TABLE webhook_outbox DROP COLUMN lease_id;
ALTER TABLE webhook_outbox DROP COLUMN link_seq;
ALTER TABLE links DROP COLUMN event_seq;
