-- The outbox table for services that write events with the Go package
-- github.com/cdc-relay/cdc-relay/outbox: the same columns as docs/outbox.sql,
-- but the id is a uuid that the writer makes (a UUIDv7, time-ordered), so the
-- service knows the event id before it commits and consumers deduplicate on
-- it. The relay reads it unchanged (--table public.outbox): it publishes the
-- id column's text as the `id` header.
--
-- A bigserial table (docs/outbox.sql) takes ids from its sequence instead:
-- to write into it from Go, add an id column of type uuid under another name
-- or use this DDL; outbox.Config.Columns maps other column names, as the
-- relay's `columns:` setting does.
CREATE TABLE IF NOT EXISTS public.outbox (
    id             uuid        PRIMARY KEY,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);
