-- The inbox of an idempotent consumer (Go package
-- github.com/cdc-relay/cdc-relay/inbox): one row per event a consumer has
-- applied, written in the same transaction as the work:
--
--   BEGIN;
--   INSERT INTO processed_messages (consumer, message_id) VALUES ('loyalty', $id)
--   ON CONFLICT DO NOTHING;        -- 0 rows: a duplicate, skip the work
--   ... the work ...
--   COMMIT;                        -- then, and only then, commit the Kafka offset
--
-- message_id is the record's `id` header (the outbox id), never a hash of
-- the value. The key includes the consumer: each consumer deduplicates on
-- its own. Do not partition by processed_at: the primary key would have to
-- include it and deduplication would break. Old rows are deleted in
-- batches by processed_at (inbox.Consumer.Cleanup); keep them longer than
-- the longest redelivery (topic retention, replays).
CREATE TABLE IF NOT EXISTS processed_messages (
    consumer     text        NOT NULL,
    message_id   text        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS processed_messages_processed_at ON processed_messages (processed_at);
