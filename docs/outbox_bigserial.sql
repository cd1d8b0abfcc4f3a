-- The alternative for an existing outbox table whose id is a bigserial (the
-- shape of many Debezium-era tables). New databases use docs/outbox.sql:
-- its uuid id is what the Go package github.com/cdc-relay/cdc-relay/outbox
-- writes. The relay reads either unchanged (--table public.outbox): it
-- publishes the id column's text as the `id` header, here a number.
--
-- To keep a bigserial table and add the helper functions (outbox_emit,
-- outbox_partitions_maintain), apply this file first, then docs/outbox.sql:
-- its CREATE TABLE IF NOT EXISTS leaves this table as it is.
--
-- To write into it from Go, the outbox package needs a column that takes a
-- UUID's text, e.g. add `event_id uuid` and map it with
-- outbox.Config{Columns: outbox.Columns{ID: "event_id"}}, and tell the relay
-- the same (columns: in --config). outbox.Write into this table as it is
-- fails: a UUID is not a bigint.
CREATE TABLE IF NOT EXISTS public.outbox (
    id             bigserial   PRIMARY KEY,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);
