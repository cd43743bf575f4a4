-- +goose Up
-- Delivery evidence (SPEC §1, docs/design.md "Delivery evidence"). Every
-- column has a default, so the claim's INSERT of a grant names none of
-- them; one change per ALTER, which MySQL 8.4, MariaDB 10.11 and TiDB 8.5
-- all accept (a key comes in its own ALTER after its column).
--
-- links.retries: how often the client of an interrupted stream download
-- may download it again under the same grant (0 to 10).
--
-- grants: what the client acknowledged.
--   delivery_status  none, partial or complete; for a session's grant it
--                    changes only when the session's coverage moves from
--                    one to the next (the coverage itself is on the session
--                    row), so a session's reports write the grant at most
--                    twice.
--   bytes_acked      a stream grant's most acknowledged bytes over its
--                    attempts (a session's: its coverage in bytes at the
--                    last change of status).
--   delivery_written TRUE once any number recorded was only what the
--                    gateway wrote, not what the client acknowledged.
--   delivered_at     when it became complete.
--   interrupted_at   when a stream attempt last ended short, or the session
--                    ended without full coverage (once: grant.interrupted).
--   attempts         downloads served under the grant, the claim's first.
--   attempts_ended   the last attempt whose end was recorded: an attempt
--                    is in flight while attempts_ended < attempts.
--   attempt_until    the lease of a retry's attempt in flight (NULL for
--                    the first attempt, which no retry can overtake).
--   client_keys      the client's keys for a retry, " k1 k2 " (each
--                    visible ASCII without spaces, so a key matches as the
--                    substring " key ").
-- grants_link_delivery keeps the listing filtered by delivery status one
-- index range scan, in the listing's (created_at, id) order.
--
-- sessions: the union of the acknowledged ranges (sessions.Coverage's
-- text, NULL for none), whether any was only written, and when a process
-- last reported on the session (its budget returns and coverage), by the
-- database's clock: the sweeper ends a session whose budget is spent only
-- a while after that.
ALTER TABLE links ADD COLUMN retries INT NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN delivery_status VARCHAR(16) NOT NULL DEFAULT 'none';
ALTER TABLE grants ADD COLUMN bytes_acked BIGINT NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN delivery_written BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE grants ADD COLUMN delivered_at DATETIME(6) NULL;
ALTER TABLE grants ADD COLUMN interrupted_at DATETIME(6) NULL;
ALTER TABLE grants ADD COLUMN attempts INT NOT NULL DEFAULT 1;
ALTER TABLE grants ADD COLUMN attempts_ended INT NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN attempt_until DATETIME(6) NULL;
ALTER TABLE grants ADD COLUMN client_keys VARCHAR(255) NULL;
ALTER TABLE sessions ADD COLUMN coverage TEXT NULL;
ALTER TABLE sessions ADD COLUMN delivery_written BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN reported_at DATETIME(6) NULL;
ALTER TABLE grants ADD KEY grants_link_delivery (link_id, delivery_status, created_at, id);
ALTER TABLE links ADD CONSTRAINT links_retries_range CHECK (retries >= 0 AND retries <= 10);
ALTER TABLE grants ADD CONSTRAINT grants_delivery_known CHECK (delivery_status IN ('none', 'partial', 'complete'));

-- +goose Down
ALTER TABLE grants DROP CONSTRAINT grants_delivery_known;
ALTER TABLE links DROP CONSTRAINT links_retries_range;
ALTER TABLE grants DROP KEY grants_link_delivery;
ALTER TABLE sessions DROP COLUMN reported_at;
ALTER TABLE sessions DROP COLUMN delivery_written;
ALTER TABLE sessions DROP COLUMN coverage;
ALTER TABLE grants DROP COLUMN client_keys;
ALTER TABLE grants DROP COLUMN attempt_until;
ALTER TABLE grants DROP COLUMN attempts_ended;
ALTER TABLE grants DROP COLUMN attempts;
ALTER TABLE grants DROP COLUMN interrupted_at;
ALTER TABLE grants DROP COLUMN delivered_at;
ALTER TABLE grants DROP COLUMN delivery_written;
ALTER TABLE grants DROP COLUMN bytes_acked;
ALTER TABLE grants DROP COLUMN delivery_status;
ALTER TABLE links DROP COLUMN retries;
