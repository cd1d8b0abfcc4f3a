package decoder

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "capture testdata/pgoutput/* again from a private PostgreSQL 15")

// goldenDir holds one directory per case: messages.bin is the captured
// WALData messages, each preceded by its length as a big-endian uint32;
// golden.json says how they were made and what they decode to.
const goldenDir = "../testdata/pgoutput"

// golden is a case's golden.json.
type golden struct {
	Description string          `json:"description"`
	Table       string          `json:"table"`
	Columns     Columns         `json:"columns"`
	PluginArgs  []string        `json:"plugin_args"`
	Setup       []string        `json:"setup"`
	Steps       []step          `json:"steps"`
	Messages    []goldenMessage `json:"messages"`
}

// step is one SQL string run on one of two sessions (a string with several
// statements and no BEGIN is one transaction).
type step struct {
	Conn int    `json:"conn,omitempty"`
	SQL  string `json:"sql"`
}

// goldenMessage is one message and its expected decoding. Type, WALStart and
// Note describe the captured message; the other fields are what Decode must
// produce (Kind "error" with MissingColumn for a *MissingColumnError).
type goldenMessage struct {
	Type          string     `json:"type"`
	WALStart      string     `json:"wal_start"`
	Note          string     `json:"note,omitempty"`
	Kind          string     `json:"kind"`
	FinalLSN      string     `json:"final_lsn,omitempty"`
	CommitLSN     string     `json:"commit_lsn,omitempty"`
	EndLSN        string     `json:"end_lsn,omitempty"`
	CommitTime    string     `json:"commit_time,omitempty"`
	Xid           uint32     `json:"xid,omitempty"`
	Row           *goldenRow `json:"row,omitempty"`
	MissingColumn string     `json:"missing_column,omitempty"`
}

// goldenRow is a Row as strings; null means the slice is nil.
type goldenRow struct {
	RelationID    uint32  `json:"relation_id"`
	ID            *string `json:"id"`
	AggregateType *string `json:"aggregate_type"`
	AggregateID   *string `json:"aggregate_id"`
	EventType     *string `json:"event_type"`
	Payload       *string `json:"payload"`
	Headers       *string `json:"headers"`
	CreatedAt     *string `json:"created_at"`
}

func lsn(v uint64) string { return fmt.Sprintf("%X/%X", v>>32, uint32(v)) }

func strp(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// decodeGolden decodes one message the way golden.json records it.
func decodeGolden(t *testing.T, d *Decoder, data []byte, m *Message) goldenMessage {
	t.Helper()
	g := goldenMessage{Type: string(data[:1])}
	if err := d.Decode(data, m); err != nil {
		var mce *MissingColumnError
		if !errors.As(err, &mce) {
			t.Fatalf("unexpected error: %v", err)
		}
		g.Kind, g.MissingColumn = "error", mce.Column
		return g
	}
	g.Kind = m.Kind.String()
	switch m.Kind {
	case KindBegin:
		g.FinalLSN, g.CommitTime, g.Xid = lsn(m.FinalLSN), timeString(m.CommitTime), m.Xid
	case KindCommit:
		g.CommitLSN, g.EndLSN, g.CommitTime = lsn(m.CommitLSN), lsn(m.EndLSN), timeString(m.CommitTime)
	case KindRow:
		r := &m.Row
		// The flags must agree with the slices.
		for _, c := range []struct {
			name string
			null bool
			v    []byte
		}{{"id", r.IDNull, r.ID}, {"aggregate_type", r.AggregateTypeNull, r.AggregateType}, {"aggregate_id", r.AggregateIDNull, r.AggregateID},
			{"event_type", r.EventTypeNull, r.EventType}, {"payload", r.PayloadNull, r.Payload}} {
			if c.null != (c.v == nil) {
				t.Errorf("%s: null flag %v but slice %q", c.name, c.null, c.v)
			}
		}
		g.Row = &goldenRow{
			RelationID: r.RelationID, ID: strp(r.ID), AggregateType: strp(r.AggregateType), AggregateID: strp(r.AggregateID),
			EventType: strp(r.EventType), Payload: strp(r.Payload), Headers: strp(r.Headers), CreatedAt: strp(r.CreatedAt),
		}
	}
	return g
}

// readMessages splits a messages.bin.
func readMessages(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var msgs [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%s: %d stray bytes at the end", path, len(b))
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) || n == 0 {
			return nil, fmt.Errorf("%s: bad length %d", path, n)
		}
		msgs = append(msgs, b[4:4+n])
		b = b[4+n:]
	}
	return msgs, nil
}

func readGolden(t *testing.T, name string) (golden, [][]byte) {
	t.Helper()
	dir := filepath.Join(goldenDir, name)
	msgs, err := readMessages(filepath.Join(dir, "messages.bin"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s/golden.json: %v", name, err)
	}
	if len(g.Messages) != len(msgs) {
		t.Fatalf("golden.json has %d messages, messages.bin %d", len(g.Messages), len(msgs))
	}
	return g, msgs
}

// TestGolden decodes pgoutput bytes captured from PostgreSQL 15 and compares
// with golden.json. With -update it first captures them again (see
// capture_test.go); the expectations then come from pglogrepl's parser, not
// from this package.
func TestGolden(t *testing.T) {
	if *update {
		captureAll(t)
	}
	for _, c := range captureCases {
		t.Run(c.name, func(t *testing.T) {
			g, msgs := readGolden(t, c.name)
			d := New(g.Table, g.Columns)
			var m Message
			var rows, commits int
			for i, data := range msgs {
				want := g.Messages[i]
				got := decodeGolden(t, d, data, &m)
				got.WALStart, got.Note = want.WALStart, want.Note
				if !reflect.DeepEqual(got, want) {
					gj, _ := json.MarshalIndent(got, "", "  ")
					wj, _ := json.MarshalIndent(want, "", "  ")
					t.Errorf("message %d (WAL %s):\ngot  %s\nwant %s", i, want.WALStart, gj, wj)
				}
				switch got.Kind {
				case "row":
					rows++
				case "commit":
					commits++
					// With proto_version 1 the end LSN of a transaction
					// (the Commit message's TransactionEndLSN) is the
					// WALStart of the XLogData that carries its Commit:
					// PostgreSQL's commit_cb_wrapper sets write_location
					// to txn->end_lsn (src/backend/replication/logical/logical.c).
					if got.EndLSN != want.WALStart {
						t.Errorf("message %d: commit end LSN %s != XLogData WALStart %s", i, got.EndLSN, want.WALStart)
					}
				}
			}
			if rows != c.rows || commits != c.commits {
				t.Errorf("decoded %d rows in %d commits, want %d in %d", rows, commits, c.rows, c.commits)
			}
			checkTransactions(t, g.Messages)
		})
	}
}

// checkTransactions checks the captured framing: Begin and Commit alternate,
// a Begin's FinalLSN is its Commit's CommitLSN, and end LSNs increase.
func checkTransactions(t *testing.T, msgs []goldenMessage) {
	t.Helper()
	var open *goldenMessage
	var lastEnd string
	for i := range msgs {
		m := &msgs[i]
		switch m.Kind {
		case "begin":
			if open != nil {
				t.Errorf("message %d: begin inside a transaction", i)
			}
			open = m
		case "commit":
			if open == nil {
				t.Fatalf("message %d: commit without begin", i)
			}
			if open.FinalLSN != m.CommitLSN || open.CommitTime != m.CommitTime {
				t.Errorf("message %d: begin final LSN %s at %s, commit LSN %s at %s", i, open.FinalLSN, open.CommitTime, m.CommitLSN, m.CommitTime)
			}
			if lastEnd != "" && parseLSN(t, m.EndLSN) <= parseLSN(t, lastEnd) {
				t.Errorf("message %d: end LSN %s not after %s", i, m.EndLSN, lastEnd)
			}
			open, lastEnd = nil, m.EndLSN
		case "row":
			if open == nil {
				t.Errorf("message %d: row outside a transaction", i)
			}
		}
	}
	if open != nil {
		t.Error("stream ends inside a transaction")
	}
}

func parseLSN(t *testing.T, s string) uint64 {
	t.Helper()
	var hi, lo uint32
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		t.Fatalf("LSN %q: %v", s, err)
	}
	return uint64(hi)<<32 | uint64(lo)
}
