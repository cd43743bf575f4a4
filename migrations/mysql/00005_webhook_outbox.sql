-- +goose Up
-- The webhook outbox (SPEC §6). A row is written in the transaction of the
-- change it announces and delivered later by any process; nothing here is
-- on a download's way except that one INSERT.
--
-- seq is the delivery order: a link's rows are written under that link's
-- row lock (the claim's, revocation's or refund's UPDATE of links), so
-- their seq grows in commit order, and a link's row is not handed out while
-- an earlier one is still pending (the NOT EXISTS on outbox_link).
--
-- next_attempt_at is also the lease: claiming a row moves it to the end
-- of the lease, so a row whose deliverer died is due again when the lease
-- lapses; claimed_by names the deliverer that may report on it.
--
-- No foreign key to links: an event outlives nothing it names by much
-- (delivered and dead rows are purged after a day), and retention must be
-- free to delete links whatever the outbox holds.
CREATE TABLE webhook_outbox (
  seq             BIGINT        NOT NULL AUTO_INCREMENT,
  event_id        CHAR(36)      NOT NULL,
  link_id         CHAR(36)      NULL,
  event_type      VARCHAR(64)   NOT NULL,
  payload         TEXT          NOT NULL,
  status          VARCHAR(16)   NOT NULL DEFAULT 'pending',
  attempts        INT           NOT NULL DEFAULT 0,
  created_at      DATETIME(6)   NOT NULL,
  next_attempt_at DATETIME(6)   NOT NULL,
  claimed_by      VARCHAR(255)  NULL,
  last_error      VARCHAR(1024) NULL,
  finished_at     DATETIME(6)   NULL,
  PRIMARY KEY (seq),
  KEY outbox_due (status, next_attempt_at, seq),
  KEY outbox_age (status, created_at),
  KEY outbox_link (link_id, status, seq),
  CONSTRAINT outbox_status_known CHECK (status IN ('pending', 'delivered', 'dead'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE webhook_outbox;
