package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

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
// The key is empty. Such a row always goes to the dead-letter topic, even
// under --on-invalid halt: rows already in the WAL keep coming after the
// publication is fixed, so a halt would halt again at every restart.
func (b *Builder) unconfigured(rec *publisher.Record, commitTime time.Time, src *decoder.OtherRow) *Invalid {
	reason := fmt.Sprintf("table %s is not a configured outbox table, but the publication publishes it (it was added while the relay ran, or before the relay's start check): "+
		"the value holds the row's columns as text; drop the table from the publication (ALTER PUBLICATION … DROP TABLE %s) or configure it as an outbox table (--table)",
		src.Table, src.Table)
	inv := &Invalid{Table: clip(src.Table, maxNameBytes), Reason: clip(reason, maxReasonBytes), Kind: ReasonUnconfigured}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	for i, col := range src.Columns {
		if i > 0 {
			buf.WriteByte(',')
		}
		enc.Encode(col) // a string always encodes
		buf.Truncate(buf.Len() - 1)
		buf.WriteByte(':')
		if v := src.Values[i]; v == nil {
			buf.WriteString("null")
		} else {
			enc.Encode(string(v))
			buf.Truncate(buf.Len() - 1) // Encode's newline
		}
	}
	buf.WriteByte('}')
	value := buf.Bytes()
	headers := []kafka.Header{{Key: HeaderTable, Value: []byte(src.Table)}, {Key: HeaderErrorKind, Value: []byte(inv.Kind)}, {Key: HeaderError, Value: []byte(inv.Reason)}}
	if publisher.Size(nil, value, headers) > b.cfg.MaxRecordBytes {
		headers[2].Value = omittedReason(inv.Reason, []string{fmt.Sprintf("the %d-byte row", len(value))})
		value = nil
	}
	if commitTime.IsZero() {
		commitTime = time.Now()
	}
	rec.Topic, rec.Key, rec.Value, rec.Headers, rec.Time = b.cfg.DLQTopic, nil, value, headers, commitTime
	return inv
}
