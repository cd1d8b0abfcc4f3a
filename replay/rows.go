package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// replayRows reads the rows through a cursor and hands each record to the
// publisher session (or prints it, in a dry run).
type replayRows struct {
	r       *replayer
	builder *recordpkg.Builder
	h       *relay.Invalids
	acker   *replayAcker
	sess    session          // nil in a dry run
	rabbit  *rabbitmq.Format // under --rabbitmq-url: where the sink sends records
	t       *replayTable     // the table being read
	table   int              // its index
	seq     uint64           // the last record's, across the tables
}

// readAll reads every row of each table's window, one table after the
// other, in one read-only snapshot, counting in each table the rows it
// read and, in a dry run, how many of them are invalid.
func (rs *replayRows) readAll(ctx context.Context, conn *pgx.Conn, tables []*replayTable) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	for i, t := range tables {
		rs.t, rs.table = t, i
		if err := rs.readTable(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

// readTable reads the rows of rs.t through the cursor.
func (rs *replayRows) readTable(ctx context.Context, tx pgx.Tx) error {
	t := rs.t
	if _, err := tx.Exec(ctx, "DECLARE "+replayCursor+" NO SCROLL CURSOR FOR "+t.q.sql, t.q.args...); err != nil {
		return fmt.Errorf("declare cursor: %w", err)
	}
	extra := make([][]byte, len(t.q.extra))
	for {
		rows, err := tx.Query(ctx, fmt.Sprintf("FETCH FORWARD %d FROM %s", replayFetch, replayCursor))
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		n := 0
		for rows.Next() {
			n++
			rs.seq++
			invalid, err := rs.row(ctx, rs.seq, rows.RawValues(), extra)
			if err != nil {
				rows.Close()
				return err
			}
			t.read++
			if invalid {
				t.dryDead++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if n < replayFetch {
			break
		}
	}
	if _, err := tx.Exec(ctx, "CLOSE "+replayCursor); err != nil {
		return fmt.Errorf("close cursor: %w", err)
	}
	return nil
}

// row turns one result row into its record and hands it over.
func (rs *replayRows) row(ctx context.Context, seq uint64, vals [][]byte, extra [][]byte) (invalid bool, err error) {
	q := rs.t.q
	row := decoder.Row{
		ID: vals[q.id], IDNull: vals[q.id] == nil,
		AggregateType: vals[q.aggType], AggregateTypeNull: vals[q.aggType] == nil,
		AggregateID: vals[q.aggID], AggregateIDNull: vals[q.aggID] == nil,
		EventType: vals[q.eventType], EventTypeNull: vals[q.eventType] == nil,
		Payload: vals[q.payload], PayloadNull: vals[q.payload] == nil,
		RelationID: rs.t.info.OID, ExtraTypes: rs.t.extraTypes, ExtraTypmods: rs.t.extraMods,
	}
	if q.headers >= 0 {
		row.Headers = vals[q.headers]
	}
	if q.createdAt >= 0 {
		row.CreatedAt = vals[q.createdAt]
	}
	for i, x := range q.extra {
		extra[i] = vals[x]
	}
	row.Extra = extra
	size := 0
	for _, v := range vals {
		size += len(v)
	}
	if rs.sess != nil {
		if err := rs.acker.waitRoom(ctx, rs.sess.Done()); err != nil {
			if serr := rs.sess.Err(); serr != nil {
				return false, serr
			}
			return false, err
		}
	}
	rec := publisher.NewRecord()
	rec.Seq, rec.Reserved = seq, size
	// The table keeps no commit time: the record's timestamp (and ce_time)
	// is created_at, unless --timestamp-column gives one.
	inv, err := rs.builder.Build(ctx, rec, createdTime(row.CreatedAt), &row)
	if err != nil {
		publisher.Release(rec)
		return false, err
	}
	line := replayLine{seq: seq, table: rs.table, id: relay.Token(row.ID), topic: rec.Topic, key: relay.Token(rec.Key)}
	badKey := false
	if rs.rabbit != nil {
		badKey = rs.rabbitLine(&line, rec)
	}
	if inv != nil {
		line.reason = inv.Reason
		if rs.h.Halt() && rs.sess != nil {
			publisher.Release(rec)
			return true, replication.Fatal(inv)
		}
		if rs.sess != nil {
			rs.h.Add(inv, seq)
		}
	}
	if rs.sess == nil {
		publisher.Release(rec)
		fmt.Fprintln(rs.r.stdout, "would be "+line.String())
		return inv != nil || badKey, nil
	}
	rs.acker.add(line, size)
	if err := rs.sess.Enqueue(rec); err != nil {
		return inv != nil, err
	}
	return inv != nil, nil
}

// rabbitLine makes line name where RabbitMQ's sink sends rec: the
// exchange and the routing key (none for a dead letter of the record
// step). A routing key over 255 bytes makes the sink send a dead letter
// instead, which it tells (deadLettered); a dry run, which has no sink,
// makes line that dead letter itself and reports it (true).
func (rs *replayRows) rabbitLine(line *replayLine, rec *publisher.Record) bool {
	line.rabbit = true
	if rec.Topic == rs.rabbit.DLQStream {
		return false
	}
	exchange, key, badKey := relay.RabbitDestination(rs.rabbit, rec)
	line.exchange, line.routingKey = exchange, relay.Token([]byte(key))
	if !badKey || rs.sess != nil {
		return false
	}
	dl, _ := rs.rabbit.Message(rec)
	line.topic = rs.rabbit.DLQStream
	line.reason, _ = dl.Publishing.Headers[rabbitmq.HeaderError].(string)
	return true
}

// createdTime parses created_at's text (timestamptz under TimeZone UTC, or
// timestamp, read as UTC); the zero time when it is NULL or not a
// timestamp (the builder then uses the time of publishing).
func createdTime(b []byte) time.Time {
	if b == nil {
		return time.Time{}
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999"} {
		if t, err := time.Parse(layout, string(b)); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
