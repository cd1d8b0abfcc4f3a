package record

import (
	"fmt"
	"sort"
	"time"

	"github.com/cdc-relay/cdc-relay/decoder"
	"github.com/cdc-relay/cdc-relay/publisher"
)

// unconfigured makes rec the dead letter of a row of a table that is not a
// configured outbox table (decoder.Row.Other): the publication publishes
// the table, most likely because someone added it while the relay ran.
// The value is a JSON object of the row's columns in table order, each the
// column's text form (what psql prints) or null, so that the row can be
// rebuilt; header "table" names the table, "error_kind" is
// unconfigured_table and "error" gives the reason.
// The key is empty. A row too large for a record keeps its smaller
// columns (which name it: its id, its created_at) and lists the others in
// header omitted_columns; if even that does not fit, the value is dropped. Such a row always goes to the dead-letter topic, even
// under --on-invalid halt: rows already in the WAL keep coming after the
// publication is fixed, so a halt would halt again at every restart.
func (b *Builder) unconfigured(rec *publisher.Record, commitTime time.Time, src *decoder.OtherRow) *Invalid {
	reason := fmt.Sprintf("table %s is not a configured outbox table, but the publication publishes it (it was added while the relay ran, or before the relay's start check): "+
		"the value holds the row's columns as text; drop the table from the publication (ALTER PUBLICATION … DROP TABLE %s) or configure it as an outbox table (--table)",
		src.Table, src.Table)
	inv := &Invalid{Table: clip(src.Table, maxNameBytes), Reason: clip(reason, maxReasonBytes), Kind: ReasonUnconfigured}
	value := unconfiguredValue(src.Columns, src.Values, nil)
	headers := []publisher.Header{{Key: HeaderTable, Value: []byte(src.Table)}, {Key: HeaderErrorKind, Value: []byte(inv.Kind)}, {Key: HeaderError, Value: []byte(inv.Reason)}}
	if publisher.Size(nil, value, headers) > b.cfg.MaxRecordBytes {
		value, headers = b.unconfiguredFit(src, inv.Reason, len(value))
	}
	if commitTime.IsZero() {
		commitTime = time.Now()
	}
	rec.Topic, rec.Key, rec.Value, rec.Headers, rec.Time = b.cfg.DLQTopic, nil, value, headers, commitTime
	return inv
}

// unconfiguredFit is the value and headers of an unconfigured_table dead
// letter whose whole row (size bytes) does not fit in a record: the largest
// column values are left out until the rest fits, and named in header
// omitted_columns and in the error header, with the replay that publishes
// the row once its table is configured. When no part of the row fits, the
// value is dropped.
func (b *Builder) unconfiguredFit(src *decoder.OtherRow, reason string, size int) ([]byte, []publisher.Header) {
	order := make([]int, len(src.Columns))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return len(src.Values[order[i]]) > len(src.Values[order[j]]) })
	omit := map[int]bool{}
	var names, parts []string
	for _, i := range order {
		if src.Values[i] == nil {
			break // the rest are NULL: nothing more to gain
		}
		omit[i] = true
		names = append(names, src.Columns[i])
		parts = append(parts, fmt.Sprintf("the %d-byte column %s", len(src.Values[i]), quoteList(src.Columns[i:i+1])))
		value := unconfiguredValue(src.Columns, src.Values, omit)
		why := omittedReason(reason, parts)
		why = fmt.Appendf(why, " (the row cannot be redriven: once %s is in --table, publish it with cdc-relay replay --table %s --since TIME, then retire this letter with cdc-relay dlq retire)", src.Table, src.Table)
		headers := []publisher.Header{{Key: HeaderTable, Value: []byte(src.Table)}, {Key: HeaderOmittedColumns, Value: omittedList(names)},
			{Key: HeaderErrorKind, Value: []byte(ReasonUnconfigured)}, {Key: HeaderError, Value: why}}
		if publisher.Size(nil, value, headers) <= b.cfg.MaxRecordBytes {
			return value, headers
		}
	}
	return nil, []publisher.Header{{Key: HeaderTable, Value: []byte(src.Table)}, {Key: HeaderErrorKind, Value: []byte(ReasonUnconfigured)},
		{Key: HeaderError, Value: omittedReason(reason, []string{fmt.Sprintf("the %d-byte row", size)})}}
}
