-- The outbox table cdc-relay reads by default (--table public.outbox), and
-- the one the Go package github.com/cdc-relay/cdc-relay/outbox writes, the
-- demo and the examples use: one DDL for all of them. Apply it once per
-- database; it also holds the helper functions below. Write events in the
-- same transaction as the business change:
--
--   BEGIN;
--   UPDATE orders SET status = 'PLACED' WHERE id = $1;
--   INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, headers)
--   VALUES ('Order', $1, 'OrderCreated', $2::jsonb, '{"traceparent": "..."}');
--   COMMIT;
--
-- The id is the event id: the relay publishes its text as the `id` header,
-- the key consumers deduplicate on. The Go package sets it (a UUIDv7, time
-- ordered, known before the commit); SQL like the INSERT above leaves it to
-- the default, gen_random_uuid() (PostgreSQL 13+, no extension).
--
-- An existing table with a bigserial id keeps working with the relay: see
-- docs/outbox_bigserial.sql, the documented alternative. Apply that file
-- before this one (this one's CREATE TABLE IF NOT EXISTS then leaves the
-- table alone and adds the functions); the Go package needs a column that
-- takes a UUID's text for its ids (outbox.Config.Columns.ID).
--
-- The relay reads rows from the replication slot, never from the table, so
-- the application may DELETE rows right after inserting them to keep the
-- table small: the publication only publishes INSERTs.
CREATE TABLE IF NOT EXISTS public.outbox (
    id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- The relay creates its publication and slot on first start when they are
-- missing. To manage the publication yourself instead:
--   CREATE PUBLICATION cdc_relay FOR TABLE public.outbox WITH (publish = 'insert');
-- Let the relay create the slot (or run cdc-relay slot recreate
-- --accept-gap after a loss). Never create it again by hand with
-- pg_create_logical_replication_slot, nor move it with
-- pg_replication_slot_advance: rows committed before the new position are
-- never read. The relay notices (its slot never passes its checkpoint), and
-- exits 3 with the repair.

-- Daily-partitioned variant: cleanup drops whole partitions (DETACH
-- PARTITION + DROP TABLE) instead of running huge DELETEs, so the table
-- never bloats and VACUUM has nothing to do. The primary key must include
-- the partition key. The relay's publication has publish_via_partition_root
-- = true, so every partition's rows arrive under public.outbox: partitions
-- may be created, attached, detached and dropped while the relay streams.
--
--   CREATE TABLE IF NOT EXISTS public.outbox (
--       id             uuid        NOT NULL DEFAULT gen_random_uuid(),
--       aggregate_type text        NOT NULL,
--       aggregate_id   text        NOT NULL,
--       event_type     text        NOT NULL,
--       payload        jsonb       NOT NULL,
--       headers        jsonb       NOT NULL DEFAULT '{}',
--       created_at     timestamptz NOT NULL DEFAULT now(),
--       PRIMARY KEY (id, created_at)
--   ) PARTITION BY RANGE (created_at);
--
--   -- once now, then daily (cron, pg_cron: SELECT cron.schedule('outbox',
--   -- '5 0 * * *', $$SELECT outbox_partitions_maintain('public.outbox', 7)$$)):
--   SELECT outbox_partitions_maintain('public.outbox', 7);
--
-- outbox_partitions_maintain creates today's and tomorrow's partitions
-- (<table>_YYYYMMDD, days in UTC) and detaches and drops the partitions of
-- days more than keep_days ago. The relay never reads them: keep_days only
-- needs to cover how long you want to keep events in the database, which is
-- also how far back `cdc-relay replay` can re-publish them after a lost slot
-- (docs/OPERATIONS.md): keep them longer than it takes to notice one.
CREATE OR REPLACE FUNCTION public.outbox_partitions_maintain(parent regclass, keep_days int DEFAULT 7)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    nsp  text;
    name text;
    day  date;
    part record;
BEGIN
    SELECT n.nspname, c.relname INTO nsp, name
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = parent;
    FOREACH day IN ARRAY ARRAY[(now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 1] LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)',
            nsp, name || '_' || to_char(day, 'YYYYMMDD'), parent,
            day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
    FOR part IN
        SELECT c.oid::regclass AS rel, c.relname
        FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = parent
    LOOP
        IF part.relname ~ ('^' || name || '_[0-9]{8}$')
           AND to_date(right(part.relname, 8), 'YYYYMMDD') < (now() AT TIME ZONE 'UTC')::date - keep_days THEN
            EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', parent, part.rel);
            EXECUTE format('DROP TABLE %s', part.rel);
        END IF;
    END LOOP;
END
$$;

-- Variant for compacted topics (--tombstone-on-null-payload true): payload
-- is nullable, and a row with a NULL payload becomes a tombstone: a record
-- with the aggregate's key and a null value, so log compaction removes the
-- aggregate's earlier events. Without the flag a NULL payload is an invalid
-- event (dead-letter topic, or a halt with --on-invalid halt).
--
--   CREATE TABLE IF NOT EXISTS public.outbox (
--       id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
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
