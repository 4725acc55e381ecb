-- Message categories and consent (issue 41; docs/consent.md).
--
-- user_consents        each user's current consent to one category, for
--                      deployments whose categories say `consent: table`
--                      (the bundled consent table):
--   user_id, category  the user and the category (config categories[].name)
--   granted            1: the user opted in to the category
--   night              1: the user also opted in to it inside the category's
--                      night window (Korea's 21:00–08:00 rule)
--   updated_at         when this consent was last given, withdrawn or
--                      confirmed again (a PUT with the same answer counts:
--                      it restarts the two years of GET /push/consents/due)
--   changed_at         when granted or night last changed
--   source             where the answer came from ("signup", "settings", ...)
--   The primary key is what every audience's consent check reads: one
--   lookup per target, by (user_id, category). idx_user_consents_due finds
--   the consents due for reconfirmation without a scan.
-- user_consent_history every PUT, appended in the same transaction as the
--                      change, kept as proof of what the user answered and
--                      when; never updated.
-- broadcasts.category  the category a broadcast was sent in (NULL: none
--                      configured when it was made)
-- broadcasts.category_rules
--                      the category's rules as the broadcast ran under them
--                      (consent, night window, labels), JSON: proof that
--                      a later edit of the YAML never changes
-- broadcasts.excluded_no_consent
--                      targets (tokens) the plan left out: their user had
--                      not consented to the category
-- broadcasts.night_deferred
--                      targets moved to the end of the category's night
--                      window: inside it, without night consent

-- +goose Up
CREATE TABLE IF NOT EXISTS user_consents (
    user_id    BIGINT UNSIGNED NOT NULL,
    category   VARCHAR(32) CHARACTER SET ascii NOT NULL,
    granted    TINYINT(1) NOT NULL DEFAULT 0,
    night      TINYINT(1) NOT NULL DEFAULT 0,
    updated_at DATETIME(6) NOT NULL,
    changed_at DATETIME(6) NOT NULL,
    source     VARCHAR(64) NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, category),
    KEY idx_user_consents_due (category, granted, updated_at, user_id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS user_consent_history (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id    BIGINT UNSIGNED NOT NULL,
    category   VARCHAR(32) CHARACTER SET ascii NOT NULL,
    granted    TINYINT(1) NOT NULL,
    night      TINYINT(1) NOT NULL,
    source     VARCHAR(64) NOT NULL DEFAULT '',
    actor      VARCHAR(128) NOT NULL DEFAULT '',
    request_id VARCHAR(64) NOT NULL DEFAULT '',
    at         DATETIME(6) NOT NULL,
    KEY idx_user_consent_history_user (user_id, category, id)
) ENGINE=InnoDB;

ALTER TABLE broadcasts
    ADD COLUMN IF NOT EXISTS category VARCHAR(32) CHARACTER SET ascii NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS category_rules TEXT NULL DEFAULT NULL,
    ADD COLUMN IF NOT EXISTS excluded_no_consent BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS night_deferred BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE broadcasts
    DROP COLUMN IF EXISTS night_deferred,
    DROP COLUMN IF EXISTS excluded_no_consent,
    DROP COLUMN IF EXISTS category_rules,
    DROP COLUMN IF EXISTS category;
DROP TABLE IF EXISTS user_consent_history;
DROP TABLE IF EXISTS user_consents;
