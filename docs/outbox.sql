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
