-- +goose Up
-- SQLite twin of migrations/mysql/00014 (the comment there explains the
-- index): the heads of the links' event queues.
CREATE INDEX outbox_pending_link ON webhook_outbox (status, link_id, link_seq);

-- +goose Down
DROP INDEX outbox_pending_link;
