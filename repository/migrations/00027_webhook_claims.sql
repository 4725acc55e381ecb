-- Webhook deliveries claimed one attempt at a time, endpoint health kept
-- on the endpoint's row, and engagement summaries that remember what they
-- settled (package webhook).
--
-- webhook_outbox.claim_token      the claim of the attempt in flight (NULL:
--                                 none): a random number the claiming
--                                 instance writes with its lease (next_at);
--                                 a result is recorded only while the row is
--                                 pending with that token and that lease, so
--                                 the late result of a claim another instance
--                                 took over changes nothing
-- ix_webhook_waiting              an endpoint's waiting rows in due order:
--                                 the claim (due rows of one endpoint), and
--                                 the health's queued count and oldest
--                                 waiting event, which read the waiting rows
--                                 only, never the delivered ones
-- webhook_endpoints.last_success  the endpoint's latest delivery, set in the
--                                 delivery's transaction (NULL: none yet; the
--                                 deliverer fills it once from the outbox
--                                 after this upgrade)
-- webhook_summary_cursors         per stage (seconds after the finish), the
--                                 last broadcast (finish time, id) whose
--                                 summary is settled: written, nothing to
--                                 write, or in the retries below; and the
--                                 instance whose pass holds the stage (a
--                                 random holder and a short lease), so that
--                                 one instance looks at each broadcast
-- webhook_summary_retries         summaries that failed, retried with backoff
--                                 until their stage is SummaryGrace overdue
--
-- Rolling deploy: everything is added, nothing changed. The previous
-- release goes on as before beside this one: it claims 100 rows under one
-- lease without a token and records its results unconditionally, reads
-- the health from the outbox, and looks at the whole window for
-- summaries. Its claim moves next_at, so this release never overwrites a
-- row the previous one took over; the reverse can happen while it runs,
-- as it did before (docs/webhooks.md, "A deploy"). ADD COLUMN of a NULL column is instant,
-- and CREATE INDEX is online (ALGORITHM=INPLACE, LOCK=NONE): events are
-- written and delivered while it builds.

-- +goose Up
ALTER TABLE webhook_outbox ADD COLUMN claim_token BIGINT UNSIGNED NULL;

CREATE INDEX ix_webhook_waiting ON webhook_outbox (endpoint, status, next_at);

ALTER TABLE webhook_endpoints ADD COLUMN last_success DATETIME(6) NULL;

CREATE TABLE IF NOT EXISTS webhook_summary_cursors (
    stage        INT UNSIGNED NOT NULL PRIMARY KEY,
    finished_at  DATETIME(6) NOT NULL,
    broadcast_id BIGINT UNSIGNED NOT NULL,
    holder       BIGINT UNSIGNED NULL,
    held_until   DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00'
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS webhook_summary_retries (
    broadcast_id BIGINT UNSIGNED NOT NULL,
    stage        INT UNSIGNED NOT NULL,
    finished_at  DATETIME(6) NOT NULL,
    attempts     INT UNSIGNED NOT NULL,
    next_at      DATETIME(6) NOT NULL,
    last_error   VARCHAR(255) NULL,
    PRIMARY KEY (broadcast_id, stage),
    KEY ix_summary_retries_due (stage, next_at)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE IF EXISTS webhook_summary_retries;
DROP TABLE IF EXISTS webhook_summary_cursors;
ALTER TABLE webhook_endpoints DROP COLUMN last_success;
DROP INDEX ix_webhook_waiting ON webhook_outbox;
ALTER TABLE webhook_outbox DROP COLUMN claim_token;
