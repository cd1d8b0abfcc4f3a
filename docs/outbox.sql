-- The outbox table cdc-relay reads by default (--table public.outbox).
-- Apply it once per database; write events in the same transaction as the
-- business change:
--
--   BEGIN;
--   UPDATE orders SET status = 'PLACED' WHERE id = $1;
--   INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, headers)
--   VALUES ('Order', $1, 'OrderCreated', $2::jsonb, '{"traceparent": "..."}');
--   COMMIT;
--
-- The relay reads rows from the replication slot, never from the table, so
-- the application may DELETE rows right after inserting them to keep the
-- table small: the publication only publishes INSERTs.
CREATE TABLE IF NOT EXISTS public.outbox (
    id             bigserial PRIMARY KEY,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Optional: let the relay create its publication and slot (it does so on
-- first start when they are missing). To manage them yourself instead:
--   CREATE PUBLICATION cdc_relay FOR TABLE public.outbox WITH (publish = 'insert');
--   SELECT pg_create_logical_replication_slot('cdc_relay', 'pgoutput');

-- Variant for compacted topics (--tombstone-on-null-payload true): payload
-- is nullable, and a row with a NULL payload becomes a tombstone: a record
-- with the aggregate's key and a null value, so log compaction removes the
-- aggregate's earlier events. Without the flag a NULL payload is an invalid
-- event (dead-letter topic, or a halt with --on-invalid halt).
--
--   CREATE TABLE IF NOT EXISTS public.outbox (
--       id             bigserial PRIMARY KEY,
--       aggregate_type text        NOT NULL,
--       aggregate_id   text        NOT NULL,
--       event_type     text        NOT NULL,
--       payload        jsonb,                -- NULL: a tombstone
--       headers        jsonb       NOT NULL DEFAULT '{}',
--       created_at     timestamptz NOT NULL DEFAULT now()
--   );
--
--   -- delete aggregate 42 from the compacted topic:
--   INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload)
--   VALUES ('Customer', '42', 'CustomerDeleted', NULL);

-- Table-less outbox (PostgreSQL 14+): write the event into the WAL as a
-- transactional logical decoding message instead of a row. No table grows,
-- nothing needs VACUUM or a cleanup job. The relay publishes every message
-- whose prefix is --message-prefix (default outbox) exactly like a row:
-- same topics, keys, Avro, headers and DLQ, confirmed only with its
-- transaction's commit; a rolled-back transaction's messages never appear.
-- Without an id, the event id is the message's LSN (e.g. 0/16B3748), stable
-- across redelivery. It returns that LSN.
--
--   BEGIN;
--   UPDATE orders SET status = 'PLACED' WHERE id = $1;
--   SELECT outbox_emit('Order', $1, 'OrderPlaced', $2::jsonb, '{"traceparent": "..."}');
--   COMMIT;
CREATE OR REPLACE FUNCTION public.outbox_emit(
    aggregate_type text,
    aggregate_id   text,
    event_type     text,
    payload        jsonb,
    headers        jsonb DEFAULT NULL,
    id             text  DEFAULT NULL,
    prefix         text  DEFAULT 'outbox'
) RETURNS pg_lsn
LANGUAGE sql VOLATILE AS $$
    SELECT pg_catalog.pg_logical_emit_message(true, prefix, (
        pg_catalog.jsonb_build_object(
            'aggregate_type', aggregate_type,
            'aggregate_id', aggregate_id,
            'event_type', event_type,
            'payload', payload)
        || CASE WHEN headers IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('headers', headers) END
        || CASE WHEN id IS NULL THEN '{}'::jsonb ELSE pg_catalog.jsonb_build_object('id', id) END
    )::text)
$$;
