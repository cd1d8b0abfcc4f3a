package replay

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// replayWindow is the resolved selection of rows.
type replayWindow struct {
	since, until   time.Time // zero: unbounded
	fromID, toID   string    // "": unbounded; canonical text
	idCast         string    // "int8" or "uuid"
	idColumn       string
	createdColumn  string
	hasTime, hasID bool
}

// uuidVersion checks that s is a uuid and returns it in lowercase with its
// version (0 when the variant is not RFC 9562's).
func uuidVersion(s string) (string, int, bool) {
	s = strings.ToLower(s)
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return "", 0, false
	}
	for i, c := range s {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", 0, false
		}
	}
	v, _ := strconv.ParseUint(s[14:15], 16, 8)
	if !strings.ContainsRune("89ab", rune(s[19])) {
		v = 0
	}
	return s, int(v), true
}

// Type oids of the id and created_at columns replay can order by.

// resolveWindow checks the action flags against the table's columns.
func resolveWindow(rf Flags, cols decoder.Columns, info replication.TableInfo, now time.Time) (*replayWindow, error) {
	w := &replayWindow{idColumn: cols.ID, createdColumn: cols.CreatedAt}
	if rf.Until != "" && rf.Since == "" {
		return nil, relay.ConfigErr("until", "needs --since: give where the time range starts")
	}
	if rf.ToID != "" && rf.FromID == "" {
		return nil, relay.ConfigErr("to-id", "needs --from-id: give where the id range starts")
	}
	if rf.Since == "" && rf.FromID == "" {
		return nil, relay.ConfigErr("since", "replay needs --since TIME or --from-id ID to choose the rows (--until and --to-id only end a range)")
	}
	if rf.Since != "" {
		var err error
		if w.since, err = relay.ParseTime("since", rf.Since, now); err != nil {
			return nil, err
		}
		if rf.Until != "" {
			if w.until, err = relay.ParseTime("until", rf.Until, now); err != nil {
				return nil, err
			}
			if !w.until.After(w.since) {
				return nil, relay.ConfigErr("until", "%s is not after --since %s", w.until.Format(time.RFC3339Nano), w.since.Format(time.RFC3339Nano))
			}
		}
		col, ok := info.Columns[cols.CreatedAt]
		if cols.CreatedAt == "" || !ok {
			return nil, relay.ConfigErr("since", "%s has no created_at column (%q; YAML columns: created_at: names it), so its rows can be chosen only by id: use --from-id and --to-id (Debezium's outbox DDL has no such column)", info.Name, cols.CreatedAt)
		}
		if col.BaseOID != relay.OIDTimestamptz && col.BaseOID != relay.OIDTimestamp {
			return nil, relay.ConfigErr("since", "column %q of %s is of type %s: --since needs a timestamptz or timestamp column (YAML columns: created_at:), or choose the rows by id with --from-id", cols.CreatedAt, info.Name, col.Type)
		}
		w.hasTime = true
	}
	if rf.FromID != "" {
		col, ok := info.Columns[cols.ID]
		if !ok {
			return nil, relay.ConfigErr("from-id", "%s has no id column %q: name it in YAML columns: id:", info.Name, cols.ID)
		}
		switch col.BaseOID {
		case relay.OIDInt2, relay.OIDInt4, relay.OIDInt8:
			w.idCast = "int8"
		case relay.OIDUUID:
			w.idCast = "uuid"
		default:
			return nil, relay.ConfigErr("from-id", "the id column %q of %s is of type %s, whose order is not the order of events: choose the rows by time with --since", cols.ID, info.Name, col.Type)
		}
		bounds := []struct {
			name string
			in   string
			out  *string
		}{{"from-id", rf.FromID, &w.fromID}, {"to-id", rf.ToID, &w.toID}}
		for _, b := range bounds {
			if b.in == "" {
				continue
			}
			if w.idCast == "int8" {
				n, err := strconv.ParseInt(b.in, 10, 64)
				if err != nil {
					return nil, relay.ConfigErr(b.name, "%q is not an integer, and the id column %q of %s is of type %s", b.in, cols.ID, info.Name, col.Type)
				}
				*b.out = strconv.FormatInt(n, 10)
				continue
			}
			u, version, ok := uuidVersion(b.in)
			switch {
			case !ok:
				return nil, relay.ConfigErr(b.name, "%q is not a uuid, and the id column %q of %s is of type uuid", b.in, cols.ID, info.Name)
			case version != 7:
				return nil, relay.ConfigErr(b.name, "%s is a version %d uuid, not a UUIDv7: only v7 uuids are ordered by time; random uuids (v4) are not, so a range between two of them is not a range of events. Choose the rows by time with --since and --until instead", u, version)
			}
			*b.out = u
		}
		if w.toID != "" && idLess(w.idCast, w.toID, w.fromID) {
			return nil, relay.ConfigErr("to-id", "%s is before --from-id %s", w.toID, w.fromID)
		}
		w.hasID = true
	}
	return w, nil
}

// idLess compares two canonical id bounds.
func idLess(cast, a, b string) bool {
	if cast == "int8" {
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return x < y
	}
	return a < b // lowercase canonical uuids sort as their bytes
}

// String describes the selection, for the summary line.
func (w *replayWindow) String() string {
	var parts []string
	if w.hasTime {
		s := w.createdColumn + " >= " + w.since.Format(time.RFC3339Nano)
		if !w.until.IsZero() {
			s += " < " + w.until.Format(time.RFC3339Nano)
		}
		parts = append(parts, s)
	}
	if w.hasID {
		s := w.idColumn + " >= " + w.fromID
		if w.toID != "" {
			s += " <= " + w.toID
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// replayQuery is the SELECT of the rows and where each Row field is in its
// result.
type replayQuery struct {
	sql  string
	args []any
	// Indexes into the result's columns; -1 when the table has none.
	id, aggType, aggID, eventType, payload, headers, createdAt int
	extra                                                      []int
}

// newReplayQuery builds the SELECT for table info with the builder's extra
// columns, in the window's order.
func newReplayQuery(info replication.TableInfo, cols decoder.Columns, extra []string, w *replayWindow) (*replayQuery, error) {
	q := &replayQuery{}
	var names []string
	index := func(name string) int {
		for i, n := range names {
			if n == name {
				return i
			}
		}
		names = append(names, name)
		return len(names) - 1
	}
	required := []struct {
		field, name string
		dst         *int
	}{
		{"id", cols.ID, &q.id}, {"aggregate_type", cols.AggregateType, &q.aggType}, {"aggregate_id", cols.AggregateID, &q.aggID},
		{"event_type", cols.EventType, &q.eventType}, {"payload", cols.Payload, &q.payload},
	}
	for _, r := range required {
		if _, ok := info.Columns[r.name]; !ok {
			return nil, relay.ConfigErr("table", "%s has no %s column %q: name it in the YAML columns: mapping (columns: {%s: ...})", info.Name, r.field, r.name, r.field)
		}
		*r.dst = index(r.name)
	}
	q.headers, q.createdAt = -1, -1
	if _, ok := info.Columns[cols.Headers]; ok && cols.Headers != "" {
		q.headers = index(cols.Headers)
	}
	if _, ok := info.Columns[cols.CreatedAt]; ok && cols.CreatedAt != "" {
		q.createdAt = index(cols.CreatedAt)
	}
	for _, name := range extra {
		q.extra = append(q.extra, index(name))
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = pgx.Identifier{n}.Sanitize()
	}
	schema, name := replication.SplitTable(info.Name)
	var where []string
	arg := func(cond, v string) {
		q.args = append(q.args, v)
		where = append(where, fmt.Sprintf(cond, len(q.args)))
	}
	created, id := pgx.Identifier{cols.CreatedAt}.Sanitize(), pgx.Identifier{cols.ID}.Sanitize()
	if w.hasTime {
		arg(created+" >= $%d::timestamptz", w.since.Format(time.RFC3339Nano))
		if !w.until.IsZero() {
			arg(created+" < $%d::timestamptz", w.until.Format(time.RFC3339Nano))
		}
	}
	if w.hasID {
		arg(id+" >= $%d::"+w.idCast, w.fromID)
		if w.toID != "" {
			arg(id+" <= $%d::"+w.idCast, w.toID)
		}
	}
	order := id
	if w.hasTime {
		order = created + ", " + id
	}
	q.sql = fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s", strings.Join(quoted, ", "),
		pgx.Identifier{schema, name}.Sanitize(), strings.Join(where, " AND "), order)
	return q, nil
}
