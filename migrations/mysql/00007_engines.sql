-- +goose Up
-- What the ledger needs to hand work out exactly on MySQL 8.4, MariaDB
-- 10.11 and TiDB 8.5 alike (docs/design.md, "Engines"). Each column comes
-- in its own ALTER and each key in another: TiDB cannot index a column in
-- the ALTER that adds it.
--
-- links.event_seq is the link's own event sequence and webhook_outbox.
-- link_seq an event's place in it, reserved by an UPDATE of the link's row
-- in the event's transaction: a link's events are delivered in that
-- order. The AUTO_INCREMENT seq stays the event's handle, but not its
-- order: TiDB allocates it in ranges per server, so it need not follow
-- commit order. Events written before this migration keep their seq as
-- their place, and each link's sequence continues after its last one.
--
-- lease_id names the call that took a row (ClaimDeletions, ClaimEvents):
-- the conditional UPDATE that takes rows writes it, and the call reads
-- back what carries it, so nothing rests on SKIP LOCKED.
ALTER TABLE links ADD COLUMN event_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhook_outbox ADD COLUMN link_seq BIGINT NULL;
ALTER TABLE webhook_outbox ADD COLUMN lease_id CHAR(36) NULL;
ALTER TABLE objects ADD COLUMN lease_id CHAR(36) NULL;
UPDATE webhook_outbox SET link_seq = seq WHERE link_id IS NOT NULL;
UPDATE links l
  JOIN (SELECT link_id, MAX(seq) AS last FROM webhook_outbox WHERE link_id IS NOT NULL GROUP BY link_id) o
    ON o.link_id = l.id
   SET l.event_seq = o.last;
ALTER TABLE webhook_outbox ADD KEY outbox_link_seq (link_id, status, link_seq);
ALTER TABLE webhook_outbox DROP KEY outbox_link;

-- +goose Down
ALTER TABLE webhook_outbox ADD KEY outbox_link (link_id, status, seq);
ALTER TABLE webhook_outbox DROP KEY outbox_link_seq;
ALTER TABLE objects DROP COLUMN lease_id;
ALTER TABLE webhook_outbox DROP COLUMN lease_id;
ALTER TABLE webhook_outbox DROP COLUMN link_seq;
ALTER TABLE links DROP COLUMN event_seq;
