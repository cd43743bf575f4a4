-- +goose Up
-- SQLite twin of migrations/mysql/00005 (the comments there explain the
-- columns). AUTOINCREMENT keeps seq growing even after the newest rows
-- were purged, so a purge never hands a new event an old event's place.
CREATE TABLE webhook_outbox (
  seq             INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id        TEXT NOT NULL,
  link_id         TEXT NULL,
  event_type      TEXT NOT NULL,
  payload         TEXT NOT NULL,
  status          TEXT NOT NULL DEFAULT 'pending',
  attempts        INT NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  claimed_by      TEXT NULL,
  last_error      TEXT NULL,
  finished_at     INTEGER NULL,
  CONSTRAINT outbox_status_known CHECK (status IN ('pending', 'delivered', 'dead'))
);
CREATE INDEX outbox_due ON webhook_outbox (status, next_attempt_at, seq);
CREATE INDEX outbox_age ON webhook_outbox (status, created_at);
CREATE INDEX outbox_link ON webhook_outbox (link_id, status, seq);

-- +goose Down
DROP TABLE webhook_outbox;
