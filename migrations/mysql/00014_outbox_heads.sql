-- +goose Up
-- The heads of the links' event queues, found without probing their
-- backlogs (dueEvents in ledger/sqlcore/outbox.go). A link's events go
-- out one at a time in its own order. The deliverers' first look visits
-- the earliest due events only; when those are one link's backlog, the
-- second look reads the first pending event of every link with events
-- pending (MIN(link_seq) grouped by link_id within 'pending'), which this
-- index keeps together: without it MariaDB jumped from link to link
-- through outbox_link_seq, every link that still has delivered events
-- kept (a day of them) included. Before both looks, one look probed a
-- busy link's whole backlog every round: 261 ms with 28,000 events of
-- one link pending, 4 deliveries a second.
ALTER TABLE webhook_outbox ADD KEY outbox_pending_link (status, link_id, link_seq);

-- +goose Down
ALTER TABLE webhook_outbox DROP KEY outbox_pending_link;
